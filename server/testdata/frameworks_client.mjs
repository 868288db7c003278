// frameworks_client.mjs runs small agents written with LangChain JS and the
// Vercel AI SDK (and the official openai client's Responses API) against
// `art serve`, unchanged: each rollout's base URL is a recording proxy
// (ART_PROXY/<rollout>/v1) that server/frameworks_test.go puts in front of
// the server. It prints what the agents saw as one JSON object on stdout.
//
// Environment: ART_NODE_FRAMEWORKS (the folder
// scripts/install-node-frameworks.sh fills), ART_PROXY, ART_API_KEY,
// ART_MODEL.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const dir = process.env.ART_NODE_FRAMEWORKS;
const require = createRequire(path.join(dir, "package.json"));
const { ChatOpenAI } = require("@langchain/openai");
const { HumanMessage } = require("@langchain/core/messages");
const lcTools = require("@langchain/core/tools");
const { createOpenAI } = require("@ai-sdk/openai");
const ai = require("ai");
const { z } = require("zod");
const OpenAI = require("openai").OpenAI;

const model = process.env.ART_MODEL;
const apiKey = process.env.ART_API_KEY;
const base = (rollout) => `${process.env.ART_PROXY}/${rollout}/v1`;
const version = (name) => JSON.parse(readFileSync(path.join(dir, "node_modules", name, "package.json"))).version;
const out = {
  versions: Object.fromEntries(["@langchain/openai", "@langchain/core", "ai", "@ai-sdk/openai", "openai"].map((n) => [n, version(n)])),
};

// The tools take a city from an enum: a bounded string (maxLength) would
// be counted in code points by the server's grammar but in UTF-16 units
// by zod, so a random model's astral characters could fail validation.

// LangChain JS: a tool-calling agent turn by turn (bindTools with
// tool_choice "required", the tool's answer, the model's reply), plus
// streaming and withStructuredOutput.
{
  const llm = new ChatOpenAI({ model, apiKey, configuration: { baseURL: base("langchain") }, maxTokens: 200, maxRetries: 0, timeout: 60_000 });
  const weather = lcTools.tool(async ({ city }) => `sunny in ${city}`, {
    name: "get_weather",
    description: "weather of a city",
    schema: z.object({ city: z.enum(["Paris", "Lima", "Oslo"]) }),
  });
  const human = new HumanMessage("weather in Paris?");
  const call = await llm.bindTools([weather], { tool_choice: "required" }).invoke([human]);
  const toolMsg = await weather.invoke(call.tool_calls[0]);
  const reply = await llm.bindTools([weather]).invoke([human, call, toolMsg], { max_tokens: 8 });
  out.langchain = { tool_calls: call.tool_calls.map((c) => ({ name: c.name, args: c.args })), tool_result: toolMsg.content, reply_type: typeof reply.content };

  const streamed = [];
  for await (const chunk of await new ChatOpenAI({ model, apiKey, configuration: { baseURL: base("langchain-stream") }, maxTokens: 6, maxRetries: 0 }).stream("hi")) {
    streamed.push(chunk.content);
  }
  out.langchain.stream_chunks = streamed.length;

  const judge = new ChatOpenAI({ model, apiKey, configuration: { baseURL: base("langchain-structured") }, maxTokens: 60, maxRetries: 0 });
  const verdict = await judge.withStructuredOutput(z.object({ verdict: z.enum(["win", "loss", "draw"]) }), { name: "verdict" }).invoke("who won?");
  out.langchain.structured = verdict;
}

// The Vercel AI SDK: openai(model) speaks the Responses API. A two-step
// agent (a forced call of a tool it executes, then the answer), streamText
// and generateObject.
{
  const openai = createOpenAI({ baseURL: base("vercel"), apiKey });
  const res = await ai.generateText({
    model: openai(model),
    system: "be brief",
    prompt: "weather in Paris?",
    maxOutputTokens: 200,
    maxRetries: 0,
    tools: {
      get_weather: ai.tool({ description: "weather of a city", inputSchema: z.object({ city: z.enum(["Paris", "Lima", "Oslo"]) }), execute: async ({ city }) => `sunny in ${city}` }),
    },
    prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: "required" } : { toolChoice: "none" }),
    stopWhen: ai.stepCountIs(2),
  });
  out.vercel = {
    steps: res.steps.map((s) => ({ finish: s.finishReason, calls: s.toolCalls.map((c) => c.toolName), results: s.toolResults.map((r) => r.output) })),
    usage: res.totalUsage,
  };
  const stream = ai.streamText({ model: createOpenAI({ baseURL: base("vercel-stream"), apiKey })(model), prompt: "hi", maxOutputTokens: 6, maxRetries: 0 });
  out.vercel.stream_text = await stream.text;
  out.vercel.stream_finish = await stream.finishReason;
  const obj = await ai.generateObject({
    model: createOpenAI({ baseURL: base("vercel-object"), apiKey })(model),
    schema: z.object({ verdict: z.enum(["win", "loss", "draw"]) }),
    prompt: "who won?",
    maxOutputTokens: 60,
    maxRetries: 0,
  });
  out.vercel.object = obj.object;
  const chat = await ai.generateText({ model: createOpenAI({ baseURL: base("vercel-chat"), apiKey }).chat(model), prompt: "hi", maxOutputTokens: 4, maxRetries: 0 });
  out.vercel.chat_finish = chat.finishReason;
}

// The official client's Responses API, with previous_response_id.
{
  const client = new OpenAI({ baseURL: base("openai-responses"), apiKey, maxRetries: 0, timeout: 60_000 });
  const first = await client.responses.create({ model, instructions: "be brief", input: "hi", max_output_tokens: 4 });
  const second = await client.responses.create({ model, instructions: "be brief", previous_response_id: first.id, input: "again", max_output_tokens: 4 });
  out.openai_responses = { model: first.model, status: [first.status, second.status], text_type: typeof first.output_text };
}

process.stdout.write(JSON.stringify(out));
