package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/artgo/art/dashboard"
	"github.com/artgo/art/store"
)

// dashboardOptions are the flags of `art dashboard`.
type dashboardOptions struct {
	data, addr, apiKey string
}

// newDashboardCmd returns `art dashboard`, which serves the web dashboard
// of a data folder on its own (no model, no engine).
func newDashboardCmd() *cobra.Command {
	var o dashboardOptions
	cmd := &cobra.Command{
		Use:   "dashboard [--data DIR] [--addr 127.0.0.1:7998]",
		Short: "Serve the web dashboard of the runs under a data folder",
		Long: `dashboard serves a web page of every model under DIR (<DIR>/<project>/models/<name>,
the layout art serve, the SDK and art demo --path write; a folder holding .art
works too): curves of every logged metric over steps (several models
overlaid), checkpoints with their val/reward, and the trajectories of each
step and split (messages, tool calls, rewards, RULER explanations, the
probability of every sampled token). It updates live while a run trains.
Open http://ADDR/dashboard/. It needs no model and reads the files only.

It binds loopback unless --addr says otherwise; with --api-key (or
ART_API_KEY) open http://ADDR/dashboard/?key=KEY once.`,
		Example: `  art dashboard --data /tmp/demo
  art dashboard --data .art --addr 0.0.0.0:7998 --api-key secret`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.apiKey == "" {
				o.apiKey = os.Getenv("ART_API_KEY")
			}
			return runDashboard(cmd.Context(), o, slog.Default())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.data, "data", store.DefaultBasePath, "data folder holding <project>/models/<name>")
	f.StringVar(&o.addr, "addr", "127.0.0.1:7998", "address to listen on (host:port)")
	f.StringVar(&o.apiKey, "api-key", "", "API key the page asks for (default $ART_API_KEY; none if both are empty)")
	return cmd
}

// runDashboard serves until ctx is cancelled.
func runDashboard(ctx context.Context, o dashboardOptions, log *slog.Logger) error {
	if st, err := os.Stat(o.data); err != nil || !st.IsDir() {
		return fmt.Errorf("dashboard: data folder %s: not a directory (give --data the folder holding <project>/models/<name>, e.g. .art)", o.data)
	}
	dash := dashboard.New(dashboard.Config{Root: o.data, APIKey: o.apiKey, Logger: log})
	mux := http.NewServeMux()
	mux.Handle(dashboard.DefaultBasePath, dash)
	mux.Handle("GET /{$}", http.RedirectHandler(dashboard.DefaultBasePath, http.StatusFound))
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if !isLoopback(ln.Addr()) && o.apiKey == "" {
		log.Warn("dashboard: listening beyond loopback without an API key; anyone who can reach it can read the runs (set --api-key)", "addr", ln.Addr().String())
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	url := "http://" + ln.Addr().String() + dashboard.DefaultBasePath
	log.Info("dashboard: ready", "url", url, "data", o.data, "api_key", o.apiKey != "")
	select {
	case err := <-served:
		return fmt.Errorf("dashboard: %w", err)
	case <-ctx.Done():
	}
	dash.Close() // end the event streams, so that Shutdown need not wait for them
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("dashboard: shutdown: %w", err)
	}
	return nil
}
