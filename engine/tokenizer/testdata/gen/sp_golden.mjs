// sp_golden.mjs writes testdata/sp_golden.json: reference token ids and
// decoded texts from @lenml/tokenizers for the SentencePiece-style
// tokenizers (Llama 2, Gemma 3), on the texts of golden.json (the same
// golden set as the byte-level tokenizers) plus the cases below, which aim
// at metaspace, byte fallback and the added tokens of these models.
//
// Usage (gen.sh does this):
//   REF_DIR=<dir with node_modules/@lenml/tokenizers> node sp_golden.mjs \
//     <golden.json> <assets dir> <sp_golden.json>

import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const [goldenPath, assetsDir, outPath] = process.argv.slice(2);
if (!outPath || !process.env.REF_DIR) {
  console.error("usage: REF_DIR=dir node sp_golden.mjs golden.json assets-dir sp_golden.json");
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(process.env.REF_DIR), "/"));
const { TokenizerLoader } = require("@lenml/tokenizers");

const extra = {
  sp_leading_spaces: "   three leading spaces",
  sp_trailing_spaces: "trailing   ",
  sp_only_spaces: "     ",
  sp_metaspace_char: "a\u2581b \u2581\u2581",
  sp_bytes_rare: "\u{1F9EC}\u{1FAE0} \u{2A6D6}\u{E000}\u0000\u0001",
  sp_newlines: "line one\n\nline two\n\n\n\tindented\r\n",
  sp_llama_chat: "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi there [/INST] Hello!</s><s>[INST] And? [/INST]",
  sp_gemma_chat: "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n",
  sp_markup: "<b>bold</b> <code>x = 1</code> <table><tr><td>1</td></tr></table>",
  sp_code: "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
  sp_digits: "3.14159 2026-11-26 1,000,000 0x1F",
  sp_mixed_scripts: "English, Français, Deutsch, 日本語, 한국어, العربية, हिन्दी, ไทย",
  sp_unk_like: "<unk><pad><mask>[@BOS@]<0x41>",
  sp_long_word: "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(3),
};

const golden = JSON.parse(fs.readFileSync(goldenPath, "utf8"));
const texts = [...Object.entries(golden.texts), ...Object.entries(extra)];
const out = { generator: golden.generator.replace("(engine/tokenizer/testdata/gen)", "(engine/tokenizer/testdata/gen/sp_golden.mjs)"), extra, ids: {} };
for (const name of ["llama2", "gemma3"]) {
  const raw = fs.readFileSync(path.join(assetsDir, name, "tokenizer.json"));
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(raw.toString("utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(assetsDir, name, "tokenizer_config.json"), "utf8")),
  });
  const cases = {};
  const decoded = {};
  for (const [n, t] of texts) {
    const ids = tok.encode(t, { add_special_tokens: false });
    cases[n] = ids;
    decoded[n] = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
  }
  out.ids[name] = { tokenizer_json_sha256: createHash("sha256").update(raw).digest("hex"), cases, decoded };
}
fs.writeFileSync(outPath, JSON.stringify(out) + "\n");
console.error(`sp_golden.mjs: wrote ${texts.length} cases to ${outPath}`);
