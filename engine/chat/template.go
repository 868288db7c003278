package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Template is a compiled chat template. It is safe for concurrent use: Render
// keeps all per-call state in the call.
type Template struct {
	src string
	tpl *exec.Template
	// contentParts is set when the template loops over message content
	// itself (multimodal templates); then list contents reach it unchanged.
	contentParts bool
}

// RenderOptions are the arguments of apply_chat_template besides messages
// and tools.
type RenderOptions struct {
	// AddGenerationPrompt appends the header that starts an assistant turn.
	AddGenerationPrompt bool
	// ContinueFinalMessage renders the last message open-ended, so a model
	// continues it: the text is cut right after that message's content, as
	// transformers does. It excludes AddGenerationPrompt.
	ContinueFinalMessage bool
	// BOSToken and EOSToken are the template variables bos_token and
	// eos_token (left undefined when empty); take them from Config.
	BOSToken, EOSToken string
	// Kwargs are extra template variables (vLLM's chat_template_kwargs),
	// e.g. {"enable_thinking": false}. Values are Go scalars, []any,
	// map[string]any (keys sorted) or json.RawMessage (key order kept). They
	// may override bos_token and eos_token but not messages, tools or
	// add_generation_prompt.
	Kwargs map[string]any
	// Now is the time strftime_now formats; zero means time.Now().
	Now time.Time
}

// TemplateError is returned by Render when the template itself refuses the
// input by calling raise_exception(message).
type TemplateError struct {
	Message string
}

func (e *TemplateError) Error() string { return "chat: template error: " + e.Message }

// templateName is the name the template is stored under in its loader.
const templateName = "/chat_template.jinja"

// contentLoop matches a for loop over a message's content, the sign that a
// template handles OpenAI content-part lists itself (vLLM's "openai" content
// format; its detection walks the AST, this looks at the text).
var contentLoop = regexp.MustCompile(`for\s+\w+(\s*,\s*\w+)?\s+in\s+\w+(\.content|\[\s*['"]content['"]\s*\])`)

// loadTag matches the Jinja tags that load another template. A chat template
// is one self-contained file (transformers renders it without a loader), so
// they are refused: they could only read files or, including the template
// itself, recurse without end.
var loadTag = regexp.MustCompile(`\{%[-+]?\s*(include|import|from|extends)\b`)

// NewTemplate compiles a chat template source (Jinja) once.
func NewTemplate(source string) (*Template, error) {
	if m := loadTag.FindStringSubmatch(source); m != nil {
		return nil, fmt.Errorf("chat: parse template: %q is not allowed: a chat template cannot load other templates or files", m[1])
	}
	cfg := newConfig()
	loader, err := loaders.NewMemoryLoader(map[string]string{templateName: rewriteConditionals(source, cfg)})
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	tpl, err := exec.NewTemplate(templateName, cfg, loader, sharedEnv)
	if err != nil {
		// gonja's message repeats the whole source; keep only the cause.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("chat: parse template: %w", err)
	}
	return &Template{src: source, tpl: tpl, contentParts: contentLoop.MatchString(source)}, nil
}

// Source returns the template text.
func (t *Template) Source() string { return t.src }

// Render renders a conversation as transformers' apply_chat_template(messages,
// tools=tools, tokenize=False, ...) does, after the message preparation vLLM's
// OpenAI server applies:
//
//   - a null or missing content becomes "";
//   - a content given as a list of parts becomes the text of its "text" parts
//     joined by "\n", unless the template loops over message content itself;
//   - a null tool_calls is dropped, and each tool call's function.arguments
//     given as a JSON string is decoded (key order kept) so templates that
//     print `arguments | tojson` see an object; an empty or missing argument
//     becomes {}, text that is not valid JSON stays a string.
//
// messages and tools are OpenAI-format JSON objects, passed to the template
// as is (tools are not re-wrapped). An empty tools slice means no tools, as
// tools=None does in transformers (OpenAI's API rejects an empty list
// anyway).
func (t *Template) Render(messages []json.RawMessage, tools []json.RawMessage, opts RenderOptions) (string, error) {
	if opts.AddGenerationPrompt && opts.ContinueFinalMessage {
		return "", errors.New("chat: AddGenerationPrompt and ContinueFinalMessage are mutually exclusive")
	}
	msgs := make([]any, len(messages))
	for i, raw := range messages {
		v, err := decodeJSON(raw)
		if err != nil {
			return "", fmt.Errorf("chat: message %d: %w", i, err)
		}
		d, ok := v.(*exec.Dict)
		if !ok {
			return "", fmt.Errorf("chat: message %d is not a non-empty JSON object", i)
		}
		if err := t.prepareMessage(d); err != nil {
			return "", fmt.Errorf("chat: message %d: %w", i, err)
		}
		msgs[i] = d
	}

	data := map[string]any{}
	if opts.BOSToken != "" {
		data["bos_token"] = opts.BOSToken
	}
	if opts.EOSToken != "" {
		data["eos_token"] = opts.EOSToken
	}
	for k, v := range opts.Kwargs {
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return "", fmt.Errorf("chat: Kwargs may not set %q", k)
		}
		tv, err := templateValue(v)
		if err != nil {
			return "", fmt.Errorf("chat: Kwargs[%q]: %w", k, err)
		}
		data[k] = tv
	}
	data["messages"] = msgs
	data["add_generation_prompt"] = opts.AddGenerationPrompt
	if len(tools) > 0 {
		list := make([]any, len(tools))
		for i, raw := range tools {
			v, err := decodeJSON(raw)
			if err != nil {
				return "", fmt.Errorf("chat: tool %d: %w", i, err)
			}
			list[i] = v
		}
		data["tools"] = list
	}

	// Per-call functions: raise_exception records its message so Render can
	// return it as a TemplateError (gonja's error wrapping loses the type).
	var raised *TemplateError
	data["raise_exception"] = func(msg string) (string, error) {
		raised = &TemplateError{Message: msg}
		return "", raised
	}
	now := opts.Now
	data["strftime_now"] = func(format string) string {
		if now.IsZero() {
			now = time.Now()
		}
		return strftime(format, now)
	}

	out, err := t.tpl.ExecuteToString(exec.NewContext(data))
	if raised != nil {
		return "", raised
	}
	if err != nil {
		return "", fmt.Errorf("chat: render: %w", err)
	}
	if opts.ContinueFinalMessage {
		if len(msgs) == 0 {
			return "", errors.New("chat: ContinueFinalMessage needs a final message")
		}
		return cutAfterFinalMessage(out, msgs[len(msgs)-1].(*exec.Dict))
	}
	return out, nil
}

// prepareMessage applies vLLM's message preparation (see Render) in place.
func (t *Template) prepareMessage(d *exec.Dict) error {
	content, _ := dictGet(d, "content")
	switch c := content.(type) {
	case nil:
		setPair(d, "content", "")
	case []any:
		if !t.contentParts {
			text, err := joinTextParts(c)
			if err != nil {
				return err
			}
			setPair(d, "content", text)
		}
	}
	calls, found := dictGet(d, "tool_calls")
	if !found {
		return nil
	}
	if calls == nil {
		removePair(d, "tool_calls")
		return nil
	}
	list, ok := calls.([]any)
	if !ok {
		return nil
	}
	for _, c := range list {
		call, ok := c.(*exec.Dict)
		if !ok {
			continue
		}
		fn, _ := dictGet(call, "function")
		f, ok := fn.(*exec.Dict)
		if !ok {
			continue
		}
		args, _ := dictGet(f, "arguments")
		switch a := args.(type) {
		case nil:
			setPair(f, "arguments", map[string]any{})
		case string:
			if strings.TrimSpace(a) == "" {
				setPair(f, "arguments", map[string]any{})
			} else if v, err := decodeJSON([]byte(a)); err == nil {
				setPair(f, "arguments", v)
			}
		}
	}
	return nil
}

func removePair(d *exec.Dict, key string) {
	for i, p := range d.Pairs {
		if p.Key.IsString() && p.Key.String() == key {
			d.Pairs = append(d.Pairs[:i], d.Pairs[i+1:]...)
			return
		}
	}
}

// joinTextParts flattens OpenAI content parts for a text-only template.
func joinTextParts(parts []any) (string, error) {
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		switch x := p.(type) {
		case string:
			texts = append(texts, x)
		case *exec.Dict:
			typ, _ := dictGet(x, "type")
			text, hasText := dictGet(x, "text")
			s, isString := text.(string)
			if (typ == "text" || typ == nil) && hasText && isString {
				texts = append(texts, s)
				continue
			}
			return "", fmt.Errorf("content part %d of type %v is not supported by this text-only template", i, typ)
		default:
			return "", fmt.Errorf("content part %d is not an object", i)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// cutAfterFinalMessage is transformers' continue_final_message: cut the
// rendered text right after the last occurrence of the final message's
// content, keeping its leading/trailing whitespace only where the template
// kept it too.
func cutAfterFinalMessage(rendered string, last *exec.Dict) (string, error) {
	content, _ := dictGet(last, "content")
	var final string
	switch c := content.(type) {
	case string:
		final = c
	case []any:
		found := false
		for i := len(c) - 1; i >= 0 && !found; i-- {
			if part, ok := c[i].(*exec.Dict); ok {
				if text, ok := dictGet(part, "text"); ok {
					final, found = fmt.Sprint(text), true
				}
			}
		}
		if !found {
			return "", errors.New("chat: ContinueFinalMessage: the final message has no text part")
		}
	default:
		return "", errors.New("chat: ContinueFinalMessage: the final message has no text content")
	}
	stripped := strings.TrimFunc(final, pyWhitespace)
	loc := strings.LastIndex(rendered, stripped)
	if loc < 0 {
		return "", errors.New("chat: ContinueFinalMessage: the final message does not appear in the rendered chat")
	}
	leftTrimmed := strings.TrimLeftFunc(final, pyWhitespace)
	if end := loc + len(leftTrimmed); end <= len(rendered) && rendered[loc:end] == final {
		return rendered[:end], nil
	}
	return rendered[:loc+len(stripped)], nil
}

// templateValue converts a Kwargs value for the template.
func templateValue(v any) (any, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return decodeJSON(x)
	case map[string]any:
		if len(x) == 0 {
			return map[string]any{}, nil
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := &exec.Dict{}
		for _, k := range keys {
			tv, err := templateValue(x[k])
			if err != nil {
				return nil, err
			}
			setPair(d, k, tv)
		}
		return d, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			tv, err := templateValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = tv
		}
		return out, nil
	case float32:
		return float64(x), nil
	case int64:
		return int(x), nil
	case int32:
		return int(x), nil
	}
	return v, nil
}
