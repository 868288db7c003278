// greedy.mjs runs llama.cpp (through node-llama-cpp's low-level API) on a
// GGUF file and prints its greedy continuation of a prompt of token ids, as
// JSON on stdout:
//
//   {"tokens": [id, ...], "top": [[[id, logit], ...], ...], "tokenized": [[id, ...], ...]}
//
// top[i] holds the highest logits (best first) of the distribution tokens[i]
// was picked from; tokenized[j] is llama.cpp's tokenization of the j-th of
// the optional TEXTS (special tokens parsed, no BOS added), which checks the
// embedded vocabulary, merges and pre-tokenizer.
//
// With LORA=ADAPTER.gguf in the environment the context applies that LoRA
// adapter (scale 1), as llama.cpp's --lora does.
//
// Used by engine/gguf's parity tests. NODE_PATH does not apply to ES modules,
// so the test passes node-llama-cpp's entry point as LLAMA_MODULE.
//
// Usage: node greedy.mjs MODEL.gguf '[1,2,3]' N_TOKENS [TOP_K] ['["text", ...]']
const [modelPath, promptJSON, nArg, topArg, textsJSON] = process.argv.slice(2);
if (!modelPath || !promptJSON || !nArg) {
  console.error("usage: node greedy.mjs MODEL.gguf '[ids]' N [TOP_K] ['[texts]']");
  process.exit(2);
}
const prompt = JSON.parse(promptJSON);
const n = Number(nArg);
const topK = Number(topArg ?? 5);
const texts = JSON.parse(textsJSON ?? "[]") ?? [];

const {getLlama, LlamaLogLevel} = await import(process.env.LLAMA_MODULE || "node-llama-cpp");

const llama = await getLlama({
  gpu: false,
  build: "never",
  progressLogs: false,
  logLevel: LlamaLogLevel.error,
  maxThreads: 1,
});
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true, checkTensors: true});
const context = await model.createContext({
  contextSize: Math.max(256, prompt.length + n),
  batchSize: 512,
  threads: 1,
  flashAttention: false,
  // f32 keys and values: llama.cpp's default f16 cache would round K and V,
  // and the comparison is about the exported weights, not cache precision.
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
  ...(process.env.LORA ? {lora: {adapters: [{filePath: process.env.LORA, scale: 1}]}} : {}),
});
const sequence = context.getSequence();

const next = {
  generateNext: {
    token: true,
    logits: {filter: {tokens: [], includeTop: topK}},
    options: {temperature: 0},
  },
};

const tokens = [];
const top = [];
let input = [...prompt.slice(0, -1), [prompt[prompt.length - 1], next]];
while (tokens.length < n) {
  const out = await sequence.controlledEvaluate(input);
  const res = out[input.length - 1];
  if (res?.next?.token == null) throw new Error(`no token generated at step ${tokens.length}`);
  tokens.push(res.next.token);
  top.push([...res.next.logits.entries()].slice(0, topK));
  input = [[res.next.token, next]];
}
const tokenized = texts.map((text) => model.tokenize(text, true));
process.stdout.write(JSON.stringify({tokens, top, tokenized}) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
