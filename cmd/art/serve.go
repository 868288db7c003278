package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/artgo/art"
	"github.com/artgo/art/dashboard"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/host/native"
	"github.com/artgo/art/server"
)

// serveOptions are the flags of `art serve`.
type serveOptions struct {
	baseModel, name, project, addr, apiKey, data string
	quantize                                     string
	requestTimeout, shutdownTimeout, writeStall  time.Duration
	maxBodyBytes                                 int64
	maxConcurrent, loraRank, prefixCacheMB       int
	loraAlpha                                    float64
	seed                                         uint64
	recompute, dashboard                         bool
	telemetry                                    telemetryFlags
	inference                                    inferenceOptions
}

// newServeCmd returns `art serve`, which hosts one trainable model: the
// OpenAI-compatible inference API and the training API (package server).
func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve --base-model DIR --name NAME [--project P] [--addr 127.0.0.1:7999] [--api-key KEY] [--data .art]",
		Short: "Serve a trainable model: OpenAI-compatible inference and the training API",
		Long: `Serve one trainable model: a LoRA adapter on the base model in --base-model (a
Hugging Face folder), its checkpoints under --data/<project>/models/<name>.

Inference is OpenAI-compatible at /v1 (POST /v1/chat/completions,
/v1/responses and /v1/completions, GET /v1/models): every checkpoint is
served as NAME@STEP, and a bare NAME means the latest step; responses
always carry token ids and logprobs. Training clients (backend/remote) use
/v1/art/. GET /healthz and GET /metrics
(Prometheus) are for operations. /dashboard/ is the web dashboard of every
run under --data (as art dashboard serves it); with an API key, open
/dashboard/?key=KEY once. With --otlp-endpoint (or OpenTelemetry's
OTEL_EXPORTER_OTLP_ENDPOINT and _HEADERS) every request and training step is
traced over OTLP/HTTP, continuing the trace of SDK clients, which send their
trajectory id (X-ART-Trajectory-ID).

The server binds loopback unless --addr says otherwise; with --api-key (or
ART_API_KEY) every route but /healthz needs "Authorization: Bearer KEY".
SIGINT or SIGTERM stops it gracefully: requests in flight, a training step
included, may finish for --shutdown-timeout, then they are cancelled (a
cancelled step writes no checkpoint). A second signal cancels at once.

With --inference vllm|sglang|llamacpp and --inference-url, chat requests go
to that engine (asking for logprobs and sampled token ids in its dialect)
and each new checkpoint is hot-loaded there as NAME@STEP; training stays in
this process. See docs/SCALING.md.`,
		Example: `  art serve --base-model ./Qwen2.5-0.5B-Instruct --name agent --project demo
  art serve --base-model ./Qwen2.5-0.5B-Instruct --name agent --quantize q8
  art serve --base-model ./Qwen2.5-7B-Instruct --name agent --quantize q4
  ART_API_KEY=secret art serve --base-model ./model --name agent --addr 0.0.0.0:7999
  art serve --base-model ./Qwen2.5-7B-Instruct --name agent --inference vllm --inference-url http://gpu:8000`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.apiKey == "" {
				o.apiKey = os.Getenv("ART_API_KEY")
			}
			log, stop, err := o.telemetry.start(cmd.Context(), slog.Default())
			if err != nil {
				return err
			}
			defer stop()
			return runServe(cmd.Context(), o, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.baseModel, "base-model", "", "Hugging Face model folder to train on (required)")
	f.StringVar(&o.name, "name", "", "model name, served as NAME@STEP (required)")
	f.StringVar(&o.project, "project", "default", "project the model belongs to")
	f.StringVar(&o.addr, "addr", server.DefaultAddr, "address to listen on (host:port)")
	f.StringVar(&o.apiKey, "api-key", "", "API key clients must send (default $ART_API_KEY; none if both are empty)")
	f.StringVar(&o.data, "data", ".art", "store root: checkpoints, logs and history")
	f.DurationVar(&o.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "time limit of an inference request (0: none)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", time.Minute, "how long a shutdown waits for requests in flight")
	f.DurationVar(&o.writeStall, "write-stall", server.DefaultWriteStall, "how long one write of a response may wait on a client that reads nothing before its connection is dropped and the generation or training step behind it cancelled (0: no bound)")
	f.Int64Var(&o.maxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted")
	f.IntVar(&o.maxConcurrent, "max-concurrent", 0, "sequences generated at once, sharing forward passes (0: 64)")
	f.IntVar(&o.prefixCacheMB, "prefix-cache-mb", native.DefaultPrefixCache>>20, "MiB of finished answers' keys and values kept so that prompts starting with one (an agent's next turn, another rollout of a scenario) skip prefilling it (0: none)")
	f.BoolVar(&o.recompute, "recompute-activations", false, "recompute activations in the backward pass: far less training memory, about a third more compute")
	f.IntVar(&o.loraRank, "lora-rank", 0, "LoRA rank of a new adapter (0: 8); an existing checkpoint keeps its own")
	f.Float64Var(&o.loraAlpha, "lora-alpha", 0, "LoRA alpha of a new adapter (0: 16)")
	f.Uint64Var(&o.seed, "seed", 0, "seed of a new adapter's initial weights")
	addQuantizeFlag(f, &o.quantize)
	f.BoolVar(&o.dashboard, "dashboard", true, "serve the web dashboard of --data at /dashboard/")
	o.telemetry.register(f)
	addInferenceFlags(cmd, &o.inference)
	cmd.MarkFlagRequired("base-model")
	cmd.MarkFlagRequired("name")
	return cmd
}

// addQuantizeFlag registers --quantize, shared by the commands that load a
// base model.
func addQuantizeFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "quantize", "", "store the base weights quantized: q8 or q4 (8- or 4-bit blocks of 32, as GGML's Q8_0 or Q4_0); sampling and training share them")
}

// runServe serves until ctx is cancelled, then shuts down gracefully.
func runServe(ctx context.Context, o serveOptions, log *slog.Logger) error {
	// Every flag is checked, and the address bound, before the model loads:
	// a typo must not cost minutes of loading or leave a step-0 checkpoint.
	if err := o.validate(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: --addr: %w", err)
	}
	defer ln.Close()
	prefixCache := int64(o.prefixCacheMB) << 20
	if prefixCache == 0 {
		prefixCache = -1 // native's "none"
	}
	if o.requestTimeout == 0 {
		o.requestTimeout = -1 // the server's "none"
	}
	if o.writeStall == 0 {
		o.writeStall = -1
	}
	log.Info("serve: loading", "base_model", o.baseModel, "model", o.name, "project", o.project)
	// Loading a large model takes minutes; a signal meanwhile returns at
	// once. native.Open writes nothing once it sees ctx done, and what it
	// was writing then (the step-0 checkpoint) is what a kill would leave:
	// the next start removes it.
	svc, err := interruptible(ctx, func() (*native.Host, error) {
		return native.Open(ctx, native.Options{
			BaseModel: o.baseModel, Name: o.name, Project: o.project, Path: o.data, Seed: o.seed,
			LoRA: art.LoRAConfig{Rank: o.loraRank, Alpha: o.loraAlpha}, MaxConcurrent: o.maxConcurrent, Logger: log,
			RecomputeActivations: o.recompute, Quantize: o.quantize, PrefixCache: prefixCache,
		})
	})
	if ctx.Err() != nil {
		if svc != nil {
			svc.Close()
		}
		return fmt.Errorf("serve: interrupted while loading %s; nothing served", o.baseModel)
	}
	if err != nil {
		return err
	}
	defer svc.Close()
	cfg := server.Config{APIKey: o.apiKey, MaxBodyBytes: o.maxBodyBytes, RequestTimeout: o.requestTimeout, WriteStall: o.writeStall, Logger: log}
	var dash *dashboard.Dashboard
	if o.dashboard {
		dash = dashboard.New(dashboard.Config{Root: o.data, BasePath: server.DashboardPath, APIKey: o.apiKey, Logger: log})
		cfg.Dashboard = dash
	}
	hosted, err := withInference(ctx, svc, o.inference, log)
	if err != nil {
		return err
	}
	srv := server.New(cfg, hosted)
	if !isLoopback(ln.Addr()) && o.apiKey == "" {
		log.Warn("serve: listening beyond loopback without an API key; anyone who can reach it can train and query the model (set --api-key)", "addr", ln.Addr().String())
	}
	log.Info("serve: ready", "url", "http://"+ln.Addr().String()+"/v1", "model", o.name, "step", svc.Step(),
		"served", o.name+"@"+fmt.Sprint(svc.Step()), "api_key", o.apiKey != "")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if dash != nil {
		dash.Close() // end the dashboard's event streams: they would hold the shutdown
	}
	log.Info("serve: shutting down; waiting for requests in flight (signal again to cancel them)", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	go func() {
		select {
		case <-again:
			log.Warn("serve: second signal; cancelling requests in flight")
			cancel()
		case <-sctx.Done():
		}
	}()
	err = srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("serve: shutdown: requests were cancelled: %w", err)
	}
	log.Info("serve: stopped", "step", svc.Step())
	return nil
}

// validate checks the flags that need no model: what is out of range is an
// error, not a default.
func (o serveOptions) validate() error {
	if _, err := model.ParseQuantization(o.quantize); err != nil {
		return err
	}
	for _, c := range []struct {
		flag string
		bad  bool
		want string
		got  any
	}{
		{"--prefix-cache-mb", o.prefixCacheMB < 0, ">= 0 (0 keeps none)", o.prefixCacheMB},
		{"--max-concurrent", o.maxConcurrent < 0 || o.maxConcurrent > native.MaxConcurrentLimit, fmt.Sprintf("in [0, %d] (0: %d)", native.MaxConcurrentLimit, native.DefaultMaxConcurrent), o.maxConcurrent},
		{"--max-body-bytes", o.maxBodyBytes <= 0, "> 0", o.maxBodyBytes},
		{"--request-timeout", o.requestTimeout < 0, ">= 0 (0: none)", o.requestTimeout},
		{"--write-stall", o.writeStall < 0, ">= 0 (0: none)", o.writeStall},
		{"--shutdown-timeout", o.shutdownTimeout < 0, ">= 0 (0 cancels requests in flight at once)", o.shutdownTimeout},
		{"--lora-rank", o.loraRank < 0 || o.loraRank > 1024, "in [0, 1024] (0: 8)", o.loraRank},
		{"--lora-alpha", !(o.loraAlpha >= 0) || math.IsInf(o.loraAlpha, 1), "a finite number >= 0 (0: 16)", o.loraAlpha},
	} {
		if c.bad {
			return fmt.Errorf("serve: %s must be %s, got %v", c.flag, c.want, c.got)
		}
	}
	return o.inference.validate()
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
