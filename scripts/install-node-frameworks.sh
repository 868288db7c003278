#!/usr/bin/env bash
# install-node-frameworks.sh installs the JavaScript agent frameworks the
# server's framework test (server/frameworks_test.go,
# server/testdata/frameworks_client.mjs) drives against `art serve`:
# LangChain JS (@langchain/openai + @langchain/core), the Vercel AI SDK
# (ai + @ai-sdk/openai) and zod, into <repo>/.assets/node-frameworks/. The
# test is skipped when the folder is absent and fails under
# ART_REQUIRE_ASSETS=1.
#
# Usage: scripts/install-node-frameworks.sh
#
# Pinned to the newest versions that run on Node 20 (this machine's): the
# next @langchain/openai (1.5.9), ai (7.x) and @ai-sdk/openai (4.x) need
# Node >= 22. Idempotent, and never leaves a half-installed folder
# (scripts/lib/npm-assets.sh).
set -euo pipefail
NAME=install-node-frameworks
source "$(dirname "${BASH_SOURCE[0]}")/lib/npm-assets.sh"

verify_npm_install() {
	(cd "$1" && timeout 60 node --input-type=module -e '
import { ChatOpenAI } from "@langchain/openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText } from "ai";
new ChatOpenAI({ model: "m", apiKey: "x", configuration: { baseURL: "http://127.0.0.1:1/v1" } });
createOpenAI({ apiKey: "x", baseURL: "http://127.0.0.1:1/v1" })("m");
if (typeof generateText !== "function") throw new Error("ai: no generateText");
')
}

install_npm_assets "$ASSETS/node-frameworks" \
	"@langchain/openai@1.5.8" \
	"@langchain/core@1.4.0" \
	"ai@6.0.325" \
	"@ai-sdk/openai@3.0.141" \
	"zod@3.25.76"
