package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Config is the part of a Hugging Face tokenizer_config.json (plus the
// chat_template.jinja files next to it) that chat rendering needs.
type Config struct {
	// Templates maps a template name to its source. A tokenizer_config.json
	// whose chat_template is a plain string (or a chat_template.jinja file)
	// gives the single entry "default"; a list of {name, template} gives one
	// entry per name.
	Templates map[string]string
	// Special tokens, "" when absent or null. They are given either as a
	// string or as an AddedToken object {"content": ...}.
	BOSToken, EOSToken, PadToken, UnkToken string
	// AddBOSToken and AddEOSToken are the add_bos_token / add_eos_token
	// flags, nil when the file does not set them.
	AddBOSToken, AddEOSToken *bool
}

// ErrNoTemplate is returned by TemplateSource when a configuration has no
// chat template to use.
var ErrNoTemplate = errors.New("chat: no chat template")

// ParseConfig parses the contents of a tokenizer_config.json.
func ParseConfig(data []byte) (*Config, error) {
	var raw struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
		BOSToken     json.RawMessage `json:"bos_token"`
		EOSToken     json.RawMessage `json:"eos_token"`
		PadToken     json.RawMessage `json:"pad_token"`
		UnkToken     json.RawMessage `json:"unk_token"`
		AddBOSToken  *bool           `json:"add_bos_token"`
		AddEOSToken  *bool           `json:"add_eos_token"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("chat: parse tokenizer config: %w", err)
	}
	c := &Config{Templates: map[string]string{}, AddBOSToken: raw.AddBOSToken, AddEOSToken: raw.AddEOSToken}
	var err error
	for _, tok := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{
		{"bos_token", raw.BOSToken, &c.BOSToken},
		{"eos_token", raw.EOSToken, &c.EOSToken},
		{"pad_token", raw.PadToken, &c.PadToken},
		{"unk_token", raw.UnkToken, &c.UnkToken},
	} {
		if *tok.dst, err = parseToken(tok.raw); err != nil {
			return nil, fmt.Errorf("chat: parse tokenizer config: %s: %w", tok.name, err)
		}
	}
	if err := parseTemplates(raw.ChatTemplate, c.Templates); err != nil {
		return nil, fmt.Errorf("chat: parse tokenizer config: chat_template: %w", err)
	}
	return c, nil
}

// parseToken reads a special token given as null, a string or an
// AddedToken object.
func parseToken(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", errors.New("want a string or an object with a content string")
	}
	return *obj.Content, nil
}

func parseTemplates(raw json.RawMessage, into map[string]string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		into["default"] = s
		return nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return errors.New("want a string or a list of {name, template}")
	}
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return fmt.Errorf("entry %d lacks name or template", i)
		}
		into[*e.Name] = *e.Template
	}
	return nil
}

// LoadConfig reads dir/tokenizer_config.json and the chat template files
// recent transformers versions save beside it: chat_template.jinja replaces
// the "default" template, additional_chat_templates/NAME.jinja adds NAME.
// A folder with chat_template.jinja needs no tokenizer_config.json.
func LoadConfig(dir string) (*Config, error) {
	c := &Config{Templates: map[string]string{}}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	switch {
	case err == nil:
		if c, err = ParseConfig(data); err != nil {
			return nil, fmt.Errorf("%w (in %s)", err, dir)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: %w", err)
	}
	src, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	switch {
	case err == nil:
		c.Templates["default"] = string(src)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("chat: %w", err)
	}
	extra, err := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	for _, path := range extra {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("chat: %w", err)
		}
		c.Templates[strings.TrimSuffix(filepath.Base(path), ".jinja")] = string(src)
	}
	if data == nil && len(c.Templates) == 0 {
		return nil, fmt.Errorf("chat: %s has neither tokenizer_config.json nor chat_template.jinja", dir)
	}
	return c, nil
}

// TemplateSource picks the template transformers would use: "tool_use" when
// tools are given and the configuration has one, otherwise "default". A
// configuration whose only template has another name yields ErrNoTemplate
// with the names it has.
func (c *Config) TemplateSource(withTools bool) (string, error) {
	if withTools {
		if src, ok := c.Templates["tool_use"]; ok {
			return src, nil
		}
	}
	if src, ok := c.Templates["default"]; ok {
		return src, nil
	}
	if len(c.Templates) == 0 {
		return "", fmt.Errorf("%w: tokenizer_config.json has no chat_template and there is no chat_template.jinja", ErrNoTemplate)
	}
	names := make([]string, 0, len(c.Templates))
	for n := range c.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	return "", fmt.Errorf("%w named \"default\" (the configuration has %s)", ErrNoTemplate, strings.Join(names, ", "))
}
