// node_client.mjs talks to `art serve` with the official OpenAI Node SDK
// and prints what it saw as one JSON object on stdout, for
// server/node_test.go to check.
//
// Environment: ART_NODE_OPENAI (the folder scripts/install-node-openai.sh
// fills), ART_BASE_URL (…/v1), ART_API_KEY, ART_MODEL.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.ART_NODE_OPENAI, "package.json"));
const mod = require("openai");
const OpenAI = mod.OpenAI ?? mod.default ?? mod;
const sdkVersion = JSON.parse(readFileSync(path.join(process.env.ART_NODE_OPENAI, "node_modules", "openai", "package.json"))).version;

const client = new OpenAI({ baseURL: process.env.ART_BASE_URL, apiKey: process.env.ART_API_KEY, maxRetries: 0, timeout: 60_000 });
const model = process.env.ART_MODEL;
const messages = [{ role: "user", content: "hi" }];
const out = { sdk: sdkVersion };

// Plain chat: the raw choices (with token ids and logprobs) go back to Go,
// which trains on them.
const plain = await client.chat.completions.create({ model, messages, max_tokens: 6, seed: 1, n: 2 });
out.plain = { model: plain.model, usage: plain.usage, prompt_token_ids: plain.prompt_token_ids, choices: plain.choices };

// Logprobs asked for, with alternatives.
const lp = await client.chat.completions.create({ model, messages, max_tokens: 4, seed: 2, logprobs: true, top_logprobs: 2 });
out.top_logprobs = lp.choices[0].logprobs.content.map((e) => e.top_logprobs.length);

// Tools are accepted and rendered into the prompt.
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
const withTools = await client.chat.completions.create({ model, messages, tools, tool_choice: "auto", max_tokens: 4, seed: 3 });
out.tools = { prompt_tokens: withTools.usage.prompt_tokens, finish_reason: withTools.choices[0].finish_reason,
  tool_calls: withTools.choices[0].message.tool_calls ?? [] };

// Streaming, with usage: the same seed as the plain request.
const stream = await client.chat.completions.create({ model, messages, max_tokens: 6, seed: 1, n: 2, stream: true,
  stream_options: { include_usage: true } });
const streamed = { content: ["", ""], token_ids: [[], []], finish_reason: [null, null], usage: null, chunks: 0 };
for await (const chunk of stream) {
  streamed.chunks++;
  streamed.model = chunk.model;
  if (chunk.usage) streamed.usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed.content[c.index] += c.delta.content ?? "";
    streamed.token_ids[c.index].push(...(c.token_ids ?? []));
    if (c.finish_reason) streamed.finish_reason[c.index] = c.finish_reason;
  }
}
out.stream = streamed;

// Structured outputs: a strict json_schema through the SDK's parse helper
// (it JSON-parses the content of json_schema answers), plain and streamed.
const verdictSchema = { type: "object", additionalProperties: false, required: ["verdict", "score", "why"],
  properties: { verdict: { enum: ["win", "loss", "draw"] }, score: { type: "number", minimum: 0, maximum: 1 },
    why: { type: "string", maxLength: 12 } } };
const response_format = { type: "json_schema", json_schema: { name: "verdict", schema: verdictSchema, strict: true } };
const parsed = await client.chat.completions.parse({ model, messages, max_tokens: 300, seed: 4, n: 4, response_format });
out.structured = parsed.choices.map((c) => ({ finish_reason: c.finish_reason, content: c.message.content, parsed: c.message.parsed }));
const sstream = await client.chat.completions.create({ model, messages, max_tokens: 300, seed: 4, stream: true, response_format });
let scontent = "";
for await (const chunk of sstream) for (const c of chunk.choices) scontent += c.delta.content ?? "";
out.structured_stream = scontent;

// Errors are OpenAI's: an APIError with the status and message.
try {
  await client.chat.completions.create({ model: "nobody@0", messages });
  out.unknown_model = { status: 200 };
} catch (e) {
  out.unknown_model = { status: e.status, message: e.message, type: e.type ?? e.error?.type };
}

// The model list.
const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;

process.stdout.write(JSON.stringify(out));
