#!/usr/bin/env python3
"""Render the golden chat-template outputs for engine/chat's Go tests.

Reads cases.json (templates, tool lists, conversations) next to this file and
writes golden/<template>/<case>.txt (the rendered text) or
golden/<template>/<case>.err (the template refused the input: first line
"raise_exception: <message>" when the template called raise_exception,
"error: <type>: <message>" for any other Python error).

Rendering mirrors transformers' apply_chat_template(tokenize=False)
(transformers/utils/chat_template_utils.py), which cannot be imported here:

  * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[AssistantTracker, jinja2.ext.loopcontrols]);
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent,
    separators=separators, sort_keys=sort_keys);
  * globals raise_exception (raises TemplateError) and strftime_now;
  * variables messages, tools (None when absent), add_generation_prompt,
    the special tokens (bos_token, eos_token) and the extra kwargs;
  * continue_final_message cuts the text after the final message's content.

Before rendering, messages get the preparation vLLM's OpenAI server applies
(vllm/entrypoints/chat_utils.py), which the Go renderer applies too:
content None -> "", a list of text parts -> their texts joined by "\\n"
(unless the template loops over message content), tool_calls None dropped,
function.arguments given as a JSON string decoded ("" -> {}; text that is not
JSON stays a string).

Run with the machine's python3 (jinja2 3.1.6): python3 testdata/render.py
(`go test ./engine/chat -update` does it for you).
"""

import copy
import json
import os
import re
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

CONTENT_LOOP = re.compile(
    r"""for\s+\w+(\s*,\s*\w+)?\s+in\s+\w+(\.content|\[\s*['"]content['"]\s*\])""")


class AssistantTracker(Extension):
    """{% generation %}...{% endgeneration %}: renders its body unchanged
    (transformers also records the character spans for assistant masks)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def prepare(messages, keep_content_parts):
    """vLLM's message preparation (see the module docstring)."""
    out = copy.deepcopy(messages)
    for m in out:
        content = m.get("content")
        if content is None:
            m["content"] = ""
        elif isinstance(content, list) and not keep_content_parts:
            texts = []
            for part in content:
                if isinstance(part, str):
                    texts.append(part)
                elif part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                else:
                    raise ValueError("unsupported content part")
            m["content"] = "\n".join(texts)
        if "tool_calls" in m and m["tool_calls"] is None:
            del m["tool_calls"]
        for call in m.get("tool_calls") or []:
            fn = call.get("function")
            if not isinstance(fn, dict):
                continue
            args = fn.get("arguments")
            if args is None or (isinstance(args, str) and not args.strip()):
                fn["arguments"] = {}
            elif isinstance(args, str):
                try:
                    fn["arguments"] = json.loads(args)
                except ValueError:
                    pass
    return out


def continue_final(rendered, final_message):
    """transformers' continue_final_message post-processing."""
    if isinstance(final_message, (list, tuple)):
        for block in reversed(final_message):
            if "text" in block:
                final_message = block["text"]
                break
        else:
            raise ValueError("no text block in the final message")
    if final_message.strip() not in rendered:
        raise ValueError("the final message does not appear in the rendered chat")
    loc = rendered.rindex(final_message.strip())
    if rendered[loc: loc + len(final_message.lstrip())] == final_message:
        return rendered[: loc + len(final_message.lstrip())]
    return rendered[: loc + len(final_message.strip())]


def render(template, source, spec, case, tools):
    messages = prepare(case["messages"], bool(CONTENT_LOOP.search(source)))
    variables = {}
    if spec.get("bos_token"):
        variables["bos_token"] = spec["bos_token"]
    if spec.get("eos_token"):
        variables["eos_token"] = spec["eos_token"]
    variables.update(case.get("kwargs", {}))
    cfm = case.get("continue_final_message", False)
    rendered = template.render(messages=messages, tools=tools,
                               add_generation_prompt=case.get("add_generation_prompt", False),
                               **variables)
    if cfm:
        rendered = continue_final(rendered, messages[-1]["content"])
    return rendered


def main():
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    written = 0
    for name, spec in corpus["templates"].items():
        with open(os.path.join(HERE, spec["file"]), encoding="utf-8") as f:
            source = f.read()
        template = compile_template(source)
        outdir = os.path.join(HERE, "golden", name)
        os.makedirs(outdir, exist_ok=True)
        for old in os.listdir(outdir):
            os.remove(os.path.join(outdir, old))
        for case in corpus["cases"]:
            tools = corpus["tools"][case["tools"]] if case.get("tools") else None
            try:
                text, ext = render(template, source, spec, case, tools), ".txt"
            except jinja2.exceptions.TemplateError as e:
                if type(e) is jinja2.exceptions.TemplateError:  # raise_exception
                    text, ext = "raise_exception: %s\n" % e.message, ".err"
                else:
                    text, ext = "error: %s: %s\n" % (type(e).__name__, e), ".err"
            except Exception as e:  # noqa: BLE001 - any failure is a golden too
                text, ext = "error: %s: %s\n" % (type(e).__name__, e), ".err"
            with open(os.path.join(outdir, case["name"] + ext), "w", encoding="utf-8", newline="") as f:
                f.write(text)
            written += 1
    print("render.py: wrote %d golden files (jinja2 %s)" % (written, jinja2.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()
