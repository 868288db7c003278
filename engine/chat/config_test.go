package chat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/artgo/art/internal/testassets"
)

func TestParseConfig(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name      string
		in        string
		templates map[string]string
		bos, eos  string
		pad, unk  string
		addBOS    *bool
		wantErr   bool
	}{
		{
			name:      "string template and string tokens",
			in:        `{"chat_template": "{{ x }}", "bos_token": "<s>", "eos_token": "</s>", "pad_token": null, "add_bos_token": true}`,
			templates: map[string]string{"default": "{{ x }}"},
			bos:       "<s>", eos: "</s>", addBOS: &yes,
		},
		{
			name:      "named templates and AddedToken objects",
			in:        `{"chat_template": [{"name": "default", "template": "d"}, {"name": "tool_use", "template": "t"}], "bos_token": {"__type": "AddedToken", "content": "<|begin_of_text|>", "lstrip": false}, "unk_token": {"content": "<unk>"}, "add_bos_token": false}`,
			templates: map[string]string{"default": "d", "tool_use": "t"},
			bos:       "<|begin_of_text|>", unk: "<unk>", addBOS: &no,
		},
		{
			name:      "no template",
			in:        `{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}`,
			templates: map[string]string{},
			eos:       "<|im_end|>", pad: "<|endoftext|>",
		},
		{name: "bad json", in: `{`, wantErr: true},
		{name: "bad template type", in: `{"chat_template": 3}`, wantErr: true},
		{name: "template entry without name", in: `{"chat_template": [{"template": "x"}]}`, wantErr: true},
		{name: "bad token", in: `{"bos_token": 3}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %+v; want an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Templates) != len(tt.templates) {
				t.Errorf("got templates %v; want %v", c.Templates, tt.templates)
			}
			for k, v := range tt.templates {
				if c.Templates[k] != v {
					t.Errorf("got template %q = %q; want %q", k, c.Templates[k], v)
				}
			}
			if c.BOSToken != tt.bos || c.EOSToken != tt.eos || c.PadToken != tt.pad || c.UnkToken != tt.unk {
				t.Errorf("got tokens %q %q %q %q; want %q %q %q %q", c.BOSToken, c.EOSToken, c.PadToken, c.UnkToken, tt.bos, tt.eos, tt.pad, tt.unk)
			}
			if (c.AddBOSToken == nil) != (tt.addBOS == nil) || (c.AddBOSToken != nil && *c.AddBOSToken != *tt.addBOS) {
				t.Errorf("got add_bos_token %v; want %v", c.AddBOSToken, tt.addBOS)
			}
		})
	}
}

func TestTemplateSource(t *testing.T) {
	both := &Config{Templates: map[string]string{"default": "d", "tool_use": "t"}}
	onlyDefault := &Config{Templates: map[string]string{"default": "d"}}
	onlyOther := &Config{Templates: map[string]string{"rag": "r"}}
	tests := []struct {
		name    string
		c       *Config
		tools   bool
		want    string
		wantErr bool
	}{
		{"tools pick tool_use", both, true, "t", false},
		{"no tools pick default", both, false, "d", false},
		{"tools fall back to default", onlyDefault, true, "d", false},
		{"no default", onlyOther, false, "", true},
		{"nothing", &Config{}, false, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.TemplateSource(tt.tools)
			if tt.wantErr {
				if !errors.Is(err, ErrNoTemplate) {
					t.Errorf("got %q, %v; want ErrNoTemplate", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	write := func(t *testing.T, dir, name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("chat_template.jinja overrides and additional templates add", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "tokenizer_config.json", `{"chat_template": "old", "eos_token": "</s>"}`)
		write(t, dir, "chat_template.jinja", "new\n")
		write(t, dir, "additional_chat_templates/tool_use.jinja", "tools")
		c, err := LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.Templates["default"] != "new\n" || c.Templates["tool_use"] != "tools" || c.EOSToken != "</s>" {
			t.Errorf("got %+v; want default from chat_template.jinja, tool_use, eos </s>", c)
		}
	})
	t.Run("template file alone", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "chat_template.jinja", "only")
		c, err := LoadConfig(dir)
		if err != nil || c.Templates["default"] != "only" {
			t.Errorf("got %+v, %v; want the default template", c, err)
		}
	})
	t.Run("empty folder", func(t *testing.T) {
		if c, err := LoadConfig(t.TempDir()); err == nil {
			t.Errorf("got %+v; want an error", c)
		}
	})
	t.Run("broken json names the folder", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "tokenizer_config.json", `{`)
		if _, err := LoadConfig(dir); err == nil {
			t.Error("got no error; want one")
		}
	})
}

// TestLoadConfigAssets loads the real tokenizer configurations fetched by
// scripts/fetch-assets.sh and checks their templates are this package's
// fixtures (skipped when the assets are missing).
func TestLoadConfigAssets(t *testing.T) {
	for _, tt := range []struct {
		asset, fixture, bos, eos string
	}{
		{testassets.Qwen3Tokenizer, "qwen3.jinja", "", "<|im_end|>"},
		{testassets.Llama31Tokenizer, "llama3_1_lenml.jinja", "<|begin_of_text|>", "<|eot_id|>"},
	} {
		t.Run(tt.asset, func(t *testing.T) {
			c, err := LoadConfig(testassets.Dir(t, tt.asset))
			if err != nil {
				t.Fatal(err)
			}
			src, err := c.TemplateSource(false)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "templates", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if src != string(want) {
				t.Errorf("template differs from testdata/templates/%s:\n%s", tt.fixture, diffSnippet(src, string(want)))
			}
			if c.BOSToken != tt.bos || c.EOSToken != tt.eos {
				t.Errorf("got bos %q eos %q; want %q %q", c.BOSToken, c.EOSToken, tt.bos, tt.eos)
			}
		})
	}
}
