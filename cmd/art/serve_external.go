package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/artgo/art/host"
	"github.com/artgo/art/host/external"
)

// inferenceOptions are the flags of `art serve` that move inference to an
// external engine (package host/external); training stays in process.
type inferenceOptions struct {
	engine, url, apiKey, dataDir string
	llamaCppStep                 int
}

func addInferenceFlags(cmd *cobra.Command, o *inferenceOptions) {
	f := cmd.Flags()
	f.StringVar(&o.engine, "inference", "native", "inference engine: native (this process), vllm, sglang or llamacpp (llama-server)")
	f.StringVar(&o.url, "inference-url", "", "the external engine's base URL, e.g. http://gpu:8000 (with --inference vllm|sglang|llamacpp)")
	f.StringVar(&o.apiKey, "inference-api-key", "", "API key of the external engine (default $ART_INFERENCE_API_KEY)")
	f.StringVar(&o.dataDir, "inference-data", "", "where the engine sees --data (a shared volume mounted elsewhere); default: the same path")
	f.IntVar(&o.llamaCppStep, "llamacpp-step", 0, "the step whose GGUF LoRA llama-server was started with (--lora); 0 needs none")
}

// native reports whether inference stays in this process.
func (o inferenceOptions) native() bool { return o.engine == "" || o.engine == "native" }

// validate checks the flags before anything loads.
func (o inferenceOptions) validate() error {
	if o.llamaCppStep < 0 {
		return fmt.Errorf("serve: --llamacpp-step must be >= 0, got %d", o.llamaCppStep)
	}
	if o.native() {
		if o.url != "" {
			return fmt.Errorf("serve: --inference-url needs --inference vllm, sglang or llamacpp")
		}
		return nil
	}
	if _, err := external.ParseDialect(o.engine); err != nil {
		return fmt.Errorf("serve: --inference: %w", err)
	}
	if o.url == "" {
		return fmt.Errorf("serve: --inference %s needs --inference-url (the engine's base URL)", o.engine)
	}
	return nil
}

// withInference returns trainer itself for native inference, or a host
// that forwards inference to the external engine the flags name (checked
// by validate).
func withInference(ctx context.Context, trainer host.Model, o inferenceOptions, log *slog.Logger) (host.Model, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.native() {
		return trainer, nil
	}
	d, _ := external.ParseDialect(o.engine)
	if o.apiKey == "" {
		o.apiKey = os.Getenv("ART_INFERENCE_API_KEY")
	}
	log.Info("serve: inference on an external engine", "engine", d.String(), "url", o.url)
	return external.Open(ctx, trainer, external.Options{Dialect: d, URL: o.url, APIKey: o.apiKey,
		EngineDataDir: o.dataDir, LlamaCppStep: o.llamaCppStep, Logger: log})
}
