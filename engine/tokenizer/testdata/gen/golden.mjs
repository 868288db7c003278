// golden.mjs writes testdata/golden.json: reference token ids and
// pre-tokenizer splits from @lenml/tokenizers (a transformers.js fork), for the
// strings of testdata/corpus.json plus seeded random strings.
//
// Usage (gen.sh does this):
//   REF_DIR=<dir with node_modules/@lenml/tokenizers> node golden.mjs \
//     <corpus.json> <assets dir> <golden.json>
//
// The output is self-contained: it repeats every input text, so the Go tests
// need only the fetched tokenizer.json files, not Node.

import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const [corpusPath, assetsDir, outPath] = process.argv.slice(2);
if (!outPath || !process.env.REF_DIR) {
  console.error("usage: REF_DIR=dir node golden.mjs corpus.json assets-dir golden.json");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(process.env.REF_DIR), "/"));
const { TokenizerLoader } = require("@lenml/tokenizers");
const refVersion = JSON.parse(
  fs.readFileSync(
    path.join(process.env.REF_DIR, "node_modules/@lenml/tokenizers/package.json"),
    "utf8",
  ),
).version;

// Tokenizers: asset directory name -> reference tokenizer.
const tokenizers = {};
const shas = {};
for (const name of ["qwen3", "llama3_1"]) {
  const jsonPath = path.join(assetsDir, name, "tokenizer.json");
  const raw = fs.readFileSync(jsonPath);
  shas[name] = createHash("sha256").update(raw).digest("hex");
  tokenizers[name] = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(raw.toString("utf8")),
    tokenizerConfig: JSON.parse(
      fs.readFileSync(path.join(assetsDir, name, "tokenizer_config.json"), "utf8"),
    ),
  });
}

// Pre-tokenizers, taken from the loaded reference objects: the Split steps of
// Qwen2 and Llama 3, and the classic GPT-2 regex that the ByteLevel
// pre-tokenizer applies when use_regex is true.
const qwenSplit = tokenizers.qwen3.pre_tokenizer.tokenizers[0];
const llamaSplit = tokenizers.llama3_1.pre_tokenizer.tokenizers[0];
const byteLevel = tokenizers.qwen3.pre_tokenizer.tokenizers[1];
const splitters = {
  gpt2: (s) => s.match(byteLevel.pattern) || [],
  qwen2: (s) => qwenSplit.pre_tokenize_text(s),
  llama3: (s) => llamaSplit.pre_tokenize_text(s),
};

// Inputs: the corpus, then random strings over an alphabet of units chosen
// to hit the regex branches, whitespace rules, NFC and added tokens.
const texts = [];
for (const { name, text } of JSON.parse(fs.readFileSync(corpusPath, "utf8"))) {
  texts.push([name, text]);
}

function mulberry32(seed) {
  return function () {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const units = [
  "a", "b", "s", "t", "e", "x", "S", "T", "R", "E", "L", "D", "é", "ß", "ж", "中", "ア", "ก",
  "re", "ve", "ll", "RE", "Ve", "lL",
  "0", "1", "7", "9", "٣", "①", "Ⅻ", "½", "𝟙",
  "'", "'", "'", "’",
  " ", " ", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u0085", "\ufeff", "\u000b", "\u2028",
  ".", ",", "!", "-", "(", "\"", "#", "_", "/", "<", "|", ">", "{", "}", "\\", "…", "—",
  "😀", "👍🏽", "\u200d", "🇫🇷",
  "\u0301", "e\u0301", "\u093f", "क", "\u0627", "\u{2ebf0}", "\ua7cb",
  "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<think>", "<|endoftext|>", "<|im_",
];
const rand = mulberry32(20240917);
for (let i = 0; i < 300; i++) {
  const n = Math.floor(rand() * 25);
  let s = "";
  for (let j = 0; j < n; j++) s += units[Math.floor(rand() * units.length)];
  texts.push([`rand${String(i).padStart(3, "0")}`, s]);
}

// Output, one case per line so diffs stay readable.
const lines = [];
const obj = (indent, entries) =>
  "{\n" + entries.map(([k, v]) => `${indent}  ${JSON.stringify(k)}: ${v}`).join(",\n") + `\n${indent}}`;

const sections = [
  ["generator", JSON.stringify(`@lenml/tokenizers@${refVersion} on Node ${process.version} (engine/tokenizer/testdata/gen)`)],
  ["unicode", JSON.stringify(process.versions.unicode)],
  ["texts", obj("  ", texts.map(([n, t]) => [n, JSON.stringify(t)]))],
  [
    "splits",
    obj(
      "  ",
      Object.entries(splitters).map(([pname, split]) => [
        pname,
        obj("    ", texts.map(([n, t]) => [n, JSON.stringify(split(t))])),
      ]),
    ),
  ],
  [
    "ids",
    obj(
      "  ",
      Object.entries(tokenizers).map(([tname, tok]) => [
        tname,
        obj("    ", [
          ["tokenizer_json_sha256", JSON.stringify(shas[tname])],
          [
            "cases",
            obj(
              "      ",
              texts.map(([n, t]) => [n, JSON.stringify(tok.encode(t, { add_special_tokens: false }))]),
            ),
          ],
        ]),
      ]),
    ),
  ],
];
fs.writeFileSync(outPath, obj("", sections) + "\n");
console.error(`golden.mjs: wrote ${texts.length} cases to ${outPath}`);
