package ruler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"go.opentelemetry.io/otel/attribute"

	"github.com/artgo/art"
	"github.com/artgo/art/internal/apierr"
	"github.com/artgo/art/internal/tracing"
)

// Judge is an OpenAI-compatible chat completions endpoint that scores
// trajectories: a hosted model (OpenAI, OpenRouter, Anthropic's OpenAI
// endpoint, ...), a local server (Ollama, vLLM, `art serve`) or a model of
// the in-process backend. Build one with NewJudge or FromEndpoint, or fill
// the fields.
type Judge struct {
	// Model is the model id the endpoint expects ("o3", "judge@0").
	Model string
	// BaseURL ends in /v1 (or the provider's equivalent).
	BaseURL string
	// APIKey is sent as a bearer token; "" sends none.
	APIKey string
	// HTTPClient, if set, makes the requests (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Temperature, if set, is sent (o-series models refuse it).
	Temperature *float64
	// MaxTokens, if > 0, bounds the answer (max_completion_tokens).
	MaxTokens int
	// ExtraBody fields are added to the request body (provider options).
	ExtraBody map[string]any
	// Spec is the string NewJudge parsed, for messages; "" means Model.
	Spec string
}

// Validate reports what makes j unusable: no model, or no base URL of an
// http(s) endpoint. NewJudge's judges are valid; a Judge written by hand
// is checked before every call.
func (j Judge) Validate() error {
	if strings.TrimSpace(j.Model) == "" {
		return fmt.Errorf("ruler: judge %q has no model (write provider/model, e.g. openai/o4-mini)", j.Spec)
	}
	u, err := url.Parse(j.BaseURL)
	if j.BaseURL == "" || err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("ruler: judge %q: base URL %q: want an http(s) URL ending in /v1", j.name(), j.BaseURL)
	}
	return nil
}

// name says which judge, for errors and logs.
func (j Judge) name() string {
	if j.Spec != "" {
		return j.Spec
	}
	return j.Model
}

// providers maps LiteLLM-style prefixes to OpenAI-compatible endpoints and
// the environment variables of their key and base URL.
var providers = map[string]struct {
	baseURL, keyEnv, baseEnv string
	keyless                  bool
}{
	"openai":       {"https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL", false},
	"openrouter":   {"https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "OPENROUTER_API_BASE", false},
	"anthropic":    {"https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY", "ANTHROPIC_API_BASE", false},
	"gemini":       {"https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY", "GEMINI_API_BASE", false},
	"groq":         {"https://api.groq.com/openai/v1", "GROQ_API_KEY", "GROQ_API_BASE", false},
	"together_ai":  {"https://api.together.xyz/v1", "TOGETHERAI_API_KEY", "TOGETHERAI_API_BASE", false},
	"deepseek":     {"https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "DEEPSEEK_API_BASE", false},
	"fireworks_ai": {"https://api.fireworks.ai/inference/v1", "FIREWORKS_AI_API_KEY", "FIREWORKS_AI_API_BASE", false},
	"ollama":       {"http://localhost:11434/v1", "OLLAMA_API_KEY", "OLLAMA_API_BASE", true},
	"vllm":         {"", "HOSTED_VLLM_API_KEY", "HOSTED_VLLM_API_BASE", true},
	"hosted_vllm":  {"", "HOSTED_VLLM_API_KEY", "HOSTED_VLLM_API_BASE", true},
}

// NewJudge parses a LiteLLM-style "provider/model" string, as ART users
// write them ("openai/o3", "openrouter/deepseek/deepseek-r1",
// "anthropic/claude-sonnet-4-20250514", "ollama/qwen3:32b",
// "vllm/my-judge"), taking the key and base URL from the provider's usual
// environment variables (OPENAI_API_KEY, OPENROUTER_API_KEY, ...;
// OLLAMA_API_BASE, HOSTED_VLLM_API_BASE, ...). baseURL and apiKey, when
// not empty, override them. A missing key or base URL is an error here,
// before any call. Without a known provider prefix, baseURL is required and
// the whole string is the model id.
func NewJudge(spec, baseURL, apiKey string) (Judge, error) {
	j := Judge{Spec: spec, Model: spec, BaseURL: baseURL, APIKey: apiKey}
	provider, model, ok := strings.Cut(spec, "/")
	p, known := providers[provider]
	if !ok || !known {
		if baseURL == "" {
			return Judge{}, fmt.Errorf("ruler: judge %q: unknown provider; write provider/model (%s) or give a base URL", spec, knownProviders())
		}
		return j, j.Validate()
	}
	j.Model = model
	if j.BaseURL == "" {
		j.BaseURL = os.Getenv(p.baseEnv)
	}
	if j.BaseURL == "" {
		j.BaseURL = p.baseURL
	}
	if j.BaseURL == "" {
		return Judge{}, fmt.Errorf("ruler: judge %q needs a base URL: set %s or pass one", spec, p.baseEnv)
	}
	if j.APIKey == "" {
		j.APIKey = os.Getenv(p.keyEnv)
	}
	if j.APIKey == "" && !p.keyless {
		return Judge{}, fmt.Errorf("ruler: judge %q needs an API key: set %s or pass one", spec, p.keyEnv)
	}
	if err := j.Validate(); err != nil {
		return Judge{}, err
	}
	return j, nil
}

func knownProviders() string {
	return "openai, openrouter, anthropic, gemini, groq, together_ai, deepseek, fireworks_ai, ollama, vllm, hosted_vllm"
}

// FromEndpoint is a judge served by an art.Endpoint: `art serve`, or a
// model of the in-process backend (art.Backend.InferenceEndpoint).
func FromEndpoint(ep art.Endpoint) Judge {
	return Judge{Model: ep.Model, BaseURL: ep.BaseURL, APIKey: ep.APIKey}
}

// Answer is one reply of a structured-output call (Judge.CompleteJSON).
type Answer struct {
	Content          string `json:"content"`
	FinishReason     string `json:"finish_reason"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

// ErrUnreachable is wrapped by the error of a call that got no answer at
// all (as opposed to a bad one): asking again for a better answer does not
// help.
var ErrUnreachable = errors.New("no answer")

// call makes one judge call under a "ruler.judge" span carrying its
// tokens and cost, and counts them in st.
func (j Judge) call(ctx context.Context, st *Stats, msgs []art.Message, schema json.RawMessage, timeout time.Duration, attempt int) (_ Answer, err error) {
	ctx, span := tracing.Start(ctx, "ruler.judge", attribute.String("gen_ai.request.model", j.Model), attribute.Int("ruler.attempt", attempt+1))
	defer func() { tracing.End(span, err) }()
	a, err := j.CompleteJSON(ctx, msgs, "ruler_scores", schema, timeout)
	if err != nil {
		return a, err
	}
	usd, priced := st.record(j.Model, a)
	span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", a.PromptTokens),
		attribute.Int64("gen_ai.usage.output_tokens", a.CompletionTokens), attribute.String("ruler.finish_reason", a.FinishReason))
	if priced {
		span.SetAttributes(attribute.Float64("ruler.cost_usd", usd))
	}
	return a, nil
}

// CompleteJSON sends msgs in one request whose answer must match schema
// (response_format json_schema named name, strict), bounded by timeout.
// It is the structured-output path RULER scores with, for other callers
// of a judge-style endpoint (scenario and input generation); checking the
// content is theirs.
func (j Judge) CompleteJSON(ctx context.Context, msgs []art.Message, name string, schema json.RawMessage, timeout time.Duration) (Answer, error) {
	if err := j.Validate(); err != nil {
		return Answer{}, err
	}
	opts := []option.RequestOption{option.WithBaseURL(j.BaseURL), option.WithMaxRetries(2)}
	if j.APIKey != "" {
		opts = append(opts, option.WithAPIKey(j.APIKey))
	} else {
		opts = append(opts, option.WithAPIKey("none"))
	}
	// The trace context goes with the request, so a judge served by `art
	// serve` continues the trace.
	hc := &http.Client{}
	if j.HTTPClient != nil {
		*hc = *j.HTTPClient
	}
	hc.Transport = tracing.Transport(hc.Transport)
	opts = append(opts, option.WithHTTPClient(hc))
	for k, v := range j.ExtraBody {
		opts = append(opts, option.WithJSONSet(k, v))
	}
	client := openai.NewClient(opts...)
	params := openai.ChatCompletionNewParams{
		Model: j.Model,
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
			JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Schema: schema, Strict: openai.Bool(true)}}},
	}
	for _, m := range msgs {
		text := m.Content.String()
		switch m.Role {
		case art.RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(text))
		case art.RoleAssistant:
			params.Messages = append(params.Messages, openai.AssistantMessage(text))
		default:
			params.Messages = append(params.Messages, openai.UserMessage(text))
		}
	}
	if j.Temperature != nil {
		params.Temperature = openai.Float(*j.Temperature)
	}
	if j.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(int64(j.MaxTokens))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		err = apierr.WithMessage(err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return Answer{}, fmt.Errorf("%w: no answer within %s: %w", ErrUnreachable, timeout, err)
		}
		return Answer{}, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if len(resp.Choices) == 0 {
		return Answer{}, errors.New("the answer has no choices")
	}
	c := resp.Choices[0]
	return Answer{Content: c.Message.Content, FinishReason: c.FinishReason,
		PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens}, nil
}
