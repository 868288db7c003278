// Package chat renders conversations into model prompts with the model's own
// Jinja chat template, and parses tool calls out of generated text.
//
// The trainer must tokenise a trajectory exactly as the server prompted the
// model, and both must match what Python's transformers (apply_chat_template)
// and vLLM produce for the same model, so rendering is byte-identical to
// Python jinja2 with transformers' settings. The golden tests in testdata/
// check that for the Qwen2.5-Instruct, Qwen3, Llama 3.1, Gemma 3, Mixtral
// Instruct and Llama 2 chat templates.
//
// A tour:
//
//	cfg, err := chat.LoadConfig(modelDir)           // tokenizer_config.json (+ chat_template.jinja)
//	src, err := cfg.TemplateSource(len(tools) > 0)  // "default" or "tool_use"
//	tpl, err := chat.NewTemplate(src)               // compile once, share freely
//	prompt, err := tpl.Render(messages, tools, chat.RenderOptions{
//		AddGenerationPrompt: true,
//		BOSToken:            cfg.BOSToken,
//		EOSToken:            cfg.EOSToken,
//		Kwargs:              map[string]any{"enable_thinking": false},
//	})
//	...generate...
//	content, calls := chat.ParseToolCalls(text, chat.DetectFormat(src))
//
// Messages and tools are OpenAI-format JSON objects passed as raw JSON, so
// their key order survives into `tojson` output as it does in Python.
//
// The templates run on github.com/nikolalohinski/gonja/v2 in a private
// environment that adapts it to Jinja as transformers configures it:
// trim_blocks and lstrip_blocks; tojson as Python's json.dumps with
// ensure_ascii=False (", " and ": " separators, indent, sort_keys and
// separators arguments, no HTML escaping); JSON objects as ordered dicts
// whose items(), keys(), values() and get() and the items filter keep that
// order; Python's str.strip/lstrip/rstrip/split/rsplit and the trim filter
// (whitespace by default); `is true` / `is false` as identity tests; a range
// that returns a list; {% generation %} blocks; raise_exception and
// strftime_now; and conditional expressions as operands, such as Gemma 3's
// `'\n' + (prefix if loop.first else "")`, which gonja parses only as a
// whole output or set value (condexpr.go rewrites them, lazily exact).
// gonja's global configuration and built-in sets are left untouched. Known remaining differences from Python Jinja: gonja does not
// distinguish undefined from none (`x is defined` is false for a key whose
// value is null, `{{ none }}` prints nothing instead of "None"), indexes
// strings by byte in s[i], and prints dicts in its own format.
//
// Tool calls: ParseToolCalls understands the Hermes format (<tool_call>
// blocks; Qwen) and the Llama 3 JSON format. It never fails: output that is
// not a well-formed call stays content, so a sampled trajectory is never
// lost to a parse error.
package chat
