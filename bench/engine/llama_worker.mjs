// llama_worker.mjs is the llama.cpp side of bench/engine: a long-lived
// worker that loads one GGUF with node-llama-cpp's low-level API (the same
// calls as engine/gguf/testdata/greedy.mjs) and answers timing requests, so
// the Go harness can interleave our engine and llama.cpp round by round
// without paying llama.cpp's start-up in every measurement.
//
// Protocol: one JSON object per line on stdin, one JSON reply per line on
// stdout (logs go to stderr). Requests:
//
//   {"cmd":"load","model":PATH,"threads":2,"contextSize":1024,"batchSize":512,"groupN":8,"groupContextSize":256}
//   {"cmd":"single","prompt":[ids],"decode":128}
//       greedy: evaluate the prompt (one batch), pick the next token, then
//       decode `decode` more tokens one at a time (stopping early once the
//       decode has run for the optional maxMs). Replies
//       {"prefillMs","decodeMs","decoded","tokens":[decoded+1 ids]}.
//   {"cmd":"group","prompt":[ids],"n":8,"tokens":128}
//       informational: n sequences of one context decode `tokens` tokens each
//       concurrently (node-llama-cpp puts their pending tokens in one
//       llama_decode batch). node-llama-cpp cannot copy a prefix between
//       sequences, so every sequence prefills the prompt itself; prefillMs
//       and decodeMs are reported apart; decoded counts the tokens in
//       decodeMs. maxMs as for single.
//   {"cmd":"quit"}
//
// node-llama-cpp is imported from LLAMA_MODULE (a file: URL of its
// dist/index.js; NODE_PATH does not apply to ES modules).
import readline from "node:readline";

const {getLlama, LlamaLogLevel} = await import(process.env.LLAMA_MODULE || "node-llama-cpp");

let llama, model, ctx1, seq1, ctxN, seqsN;

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const send = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const greedyNext = {generateNext: {token: true, options: {temperature: 0}}};

async function load(req) {
  const threads = req.threads ?? 2;
  llama = await getLlama({
    gpu: false,
    build: "never",
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
    maxThreads: threads,
  });
  const t0 = now();
  model = await llama.loadModel({modelPath: req.model, gpuLayers: 0, useMmap: true});
  const loadMs = now() - t0;
  ctx1 = await model.createContext({
    contextSize: req.contextSize ?? 1024,
    batchSize: req.batchSize ?? 512,
    threads: {ideal: threads, min: threads},
  });
  seq1 = ctx1.getSequence();
  if (req.groupN > 0) {
    ctxN = await model.createContext({
      sequences: req.groupN,
      contextSize: req.groupContextSize ?? 256,
      batchSize: req.batchSize ?? 512,
      threads: {ideal: threads, min: threads},
    });
    seqsN = Array.from({length: req.groupN}, () => ctxN.getSequence());
  }
  return {
    loadMs,
    release: llama.llamaCppRelease?.release,
    flashAttention: ctx1.flashAttention,
    contextSize: ctx1.contextSize,
    batchSize: ctx1.batchSize,
    threads: threads,
    gpu: llama.gpu,
  };
}

// generate runs greedy decoding on seq from prompt and returns the timings;
// the decode stops early once it has run for maxMs (a loaded machine).
async function generate(seq, prompt, decode, maxMs = Infinity) {
  await seq.clearHistory();
  const t0 = now();
  let input = [...prompt.slice(0, -1), [prompt[prompt.length - 1], greedyNext]];
  let out = await seq.controlledEvaluate(input);
  let tok = out[input.length - 1]?.next?.token;
  if (tok == null) throw new Error("no token after the prompt");
  const t1 = now();
  const tokens = [tok];
  for (let i = 0; i < decode && now() - t1 <= maxMs; i++) {
    out = await seq.controlledEvaluate([[tok, greedyNext]]);
    tok = out[0]?.next?.token;
    if (tok == null) throw new Error(`no token at decode step ${i}`);
    tokens.push(tok);
  }
  const t2 = now();
  return {prefillMs: t1 - t0, decodeMs: t2 - t1, decoded: tokens.length - 1, tokens};
}

async function group(req) {
  if (!seqsN || req.n > seqsN.length) throw new Error("group context not created (load with groupN)");
  const seqs = seqsN.slice(0, req.n);
  const prompt = req.prompt;
  await Promise.all(seqs.map((s) => s.clearHistory()));
  // Prefill all sequences together, then decode all together.
  const t0 = now();
  let input = [...prompt.slice(0, -1), [prompt[prompt.length - 1], greedyNext]];
  const firsts = await Promise.all(seqs.map((s) => s.controlledEvaluate(input)));
  const t1 = now();
  const toks = firsts.map((o) => o[input.length - 1].next.token);
  const maxMs = req.maxMs ?? Infinity;
  let decoded = 0;
  await Promise.all(seqs.map(async (s, i) => {
    let tok = toks[i];
    for (let k = 1; k < req.tokens && now() - t1 <= maxMs; k++) {
      const o = await s.controlledEvaluate([[tok, greedyNext]]);
      tok = o[0].next.token;
      decoded++;
    }
  }));
  const t2 = now();
  return {prefillMs: t1 - t0, decodeMs: t2 - t1, decoded};
}

const rl = readline.createInterface({input: process.stdin});
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
    switch (req.cmd) {
      case "load":
        send({ok: true, ...(await load(req))});
        break;
      case "single":
        send({ok: true, ...(await generate(seq1, req.prompt, req.decode, req.maxMs ?? Infinity))});
        break;
      case "group":
        send({ok: true, ...(await group(req))});
        break;
      case "quit":
        send({ok: true});
        await ctxN?.dispose();
        await ctx1?.dispose();
        await model?.dispose();
        await llama?.dispose();
        process.exit(0);
      default:
        throw new Error(`unknown cmd ${req.cmd}`);
    }
  } catch (e) {
    send({ok: false, error: String(e?.stack ?? e)});
  }
}
