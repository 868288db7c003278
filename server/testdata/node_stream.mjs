// node_stream.mjs streams the Responses API and the legacy completions
// from `art serve` with the official OpenAI Node SDK, next to the plain
// answer at the same seed, and prints what it saw as one JSON object on
// stdout, for server/node_test.go to check. The server holds each streamed
// generation for a while after its first tokens, so the time between the
// first delta and the end tells whether deltas were sent as generated.
//
// Environment: ART_NODE_OPENAI (the folder scripts/install-node-openai.sh
// fills), ART_BASE_URL (…/v1), ART_API_KEY, ART_MODEL.
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.ART_NODE_OPENAI, "package.json"));
const mod = require("openai");
const OpenAI = mod.OpenAI ?? mod.default ?? mod;

const client = new OpenAI({ baseURL: process.env.ART_BASE_URL, apiKey: process.env.ART_API_KEY, maxRetries: 0, timeout: 60_000 });
const model = process.env.ART_MODEL;
const out = {};

// The Responses API through the SDK's stream helper, which rebuilds the
// response from the events (and throws on events out of order).
const params = { model, instructions: "be brief", input: "Once upon", max_output_tokens: 40, seed: 7 };
const plain = await client.responses.create(params);
const start = Date.now();
const rs = client.responses.stream(params);
const r = { types: [], deltas: "", first_delta_ms: null };
for await (const ev of rs) {
  r.types.push(ev.type);
  if (ev.type === "response.output_text.delta") {
    r.first_delta_ms ??= Date.now() - start;
    r.deltas += ev.delta;
  }
}
r.end_ms = Date.now() - start;
const final = await rs.finalResponse();
r.final_text = final.output_text;
r.final_id = final.id;
r.final_status = final.status;
r.plain_text = plain.output_text;
r.plain_status = plain.status;
out.responses = r;

// The legacy completions, streamed.
const cparams = { model, prompt: "Once upon", max_tokens: 40, seed: 5 };
const cplain = await client.completions.create(cparams);
const cstart = Date.now();
const cs = await client.completions.create({ ...cparams, stream: true });
const c = { text: "", token_ids: [], first_text_ms: null, finish_reason: null };
for await (const chunk of cs) {
  for (const ch of chunk.choices) {
    if (ch.text) c.first_text_ms ??= Date.now() - cstart;
    c.text += ch.text;
    c.token_ids.push(...(ch.token_ids ?? []));
    if (ch.finish_reason) c.finish_reason = ch.finish_reason;
  }
}
c.end_ms = Date.now() - cstart;
c.plain_text = cplain.choices[0].text;
c.plain_token_ids = cplain.choices[0].token_ids;
c.plain_finish_reason = cplain.choices[0].finish_reason;
out.completions = c;

process.stdout.write(JSON.stringify(out));
