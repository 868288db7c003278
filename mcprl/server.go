// Package mcprl trains agents on the tools of MCP (Model Context Protocol)
// servers, as OpenPipe ART's MCP•RL does: it connects to a server (a
// command over stdio, or a URL over streamable HTTP) with the official Go
// SDK, turns its tools into OpenAI function tools, runs a ready multi-turn
// rollout whose sampled turns are recorded as trainable Choices (Agent),
// and generates training tasks from the tools and resources with any
// judge-style endpoint (Generate).
//
//	srv, err := mcprl.Start(ctx, mcprl.Options{}, "npx", "@modelcontextprotocol/server-memory")
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	tools, err := srv.Tools(ctx)
//	...
//	traj, err := mcprl.Agent{Client: client, Model: model.InferenceName(-1)}.Run(ctx, srv, tools, task)
//
// Every wait is bounded: starting a server and its handshake
// (Options.StartTimeout), each tool call (Options.CallTimeout), and
// stopping it. A server started from a command runs in its own process
// group, and Close (or a failed start) stops the whole group, so no
// process is left behind, whatever the server spawned.
package mcprl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artgo/art"
)

// Options configure a connection to an MCP server. The zero value is ready
// to use.
type Options struct {
	// StartTimeout bounds starting the server and the MCP handshake; 0
	// means 60 seconds.
	StartTimeout time.Duration
	// CallTimeout bounds each tool call and listing; 0 means 60 seconds.
	CallTimeout time.Duration
	// StopTimeout is how long Close waits for a command's server to exit
	// after its input is closed, and again after SIGTERM, before killing
	// its process group; 0 means 2 seconds.
	StopTimeout time.Duration

	// Env is added to the environment of a command ("KEY=value").
	Env []string
	// Dir is the working directory of a command ("" means the current one).
	Dir string
	// Stderr, if set, receives a command's standard error. Its last lines
	// are kept either way and quoted in errors.
	Stderr io.Writer

	// HTTPClient, if set, makes the requests to a streamable HTTP server.
	HTTPClient *http.Client
}

func (o Options) startTimeout() time.Duration { return orDefault(o.StartTimeout, 60*time.Second) }
func (o Options) callTimeout() time.Duration  { return orDefault(o.CallTimeout, 60*time.Second) }
func (o Options) stopTimeout() time.Duration  { return orDefault(o.StopTimeout, 2*time.Second) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Server is a connection to one MCP server. Its methods are safe for
// concurrent use; Close ends it.
type Server struct {
	name    string // the command or URL, for messages
	session *mcp.ClientSession
	proc    *process // nil for an HTTP server
	opts    Options

	closeOnce sync.Once
	closeErr  error
}

// client is the MCP client every connection presents itself as.
func client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "art-mcprl", Version: "1"}, nil)
}

// Start runs command with args as an MCP server over stdio and connects to
// it. The server runs in its own process group until Close. A command that
// cannot start, exits, or does not finish the handshake within
// opts.StartTimeout is an error quoting its last lines of standard error,
// and leaves no process behind.
func Start(ctx context.Context, opts Options, command string, args ...string) (*Server, error) {
	name := strings.TrimSpace(strings.Join(append([]string{command}, args...), " "))
	p, err := startProcess(command, args, opts)
	if err != nil {
		return nil, fmt.Errorf("mcprl: start %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.startTimeout())
	defer cancel()
	session, err := client().Connect(ctx, &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin}, nil)
	if err != nil {
		stopErr := p.stop(opts.stopTimeout())
		return nil, fmt.Errorf("mcprl: connect to %s: %w%s", name, errWithin(ctx, err, opts.startTimeout()), p.exitNote(stopErr))
	}
	return &Server{name: name, session: session, proc: p, opts: opts}, nil
}

// Connect connects to an MCP server over streamable HTTP at url (its MCP
// endpoint, such as http://127.0.0.1:3001/mcp).
func Connect(ctx context.Context, url string, opts Options) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.startTimeout())
	defer cancel()
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: opts.HTTPClient, MaxRetries: 2, DisableStandaloneSSE: true}
	session, err := client().Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("mcprl: connect to %s: %w", url, errWithin(ctx, err, opts.startTimeout()))
	}
	return &Server{name: url, session: session, opts: opts}, nil
}

// errWithin says that err came from running out of time, when it did.
func errWithin(ctx context.Context, err error, d time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", d, err)
	}
	return err
}

// String names the server: its command line or URL.
func (s *Server) String() string { return s.name }

// Close ends the session and, for a command, stops its process group:
// the server gets StopTimeout to exit after its input closes, then SIGTERM,
// then SIGKILL. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		err := s.session.Close()
		if s.proc != nil {
			// A server that exits on its own when stdin closes reports an
			// error from the session (its pipes are gone); what matters is
			// that it stopped.
			err = s.proc.stop(s.opts.stopTimeout())
		}
		if err != nil {
			s.closeErr = fmt.Errorf("mcprl: close %s: %w", s.name, err)
		}
	})
	return s.closeErr
}

// Tool is a tool an MCP server offers.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"` // a JSON Schema object
}

// FunctionTool returns t as an OpenAI function tool, its input schema as
// the parameters.
func (t Tool) FunctionTool() art.Tool {
	return art.FunctionTool(t.Name, t.Description, t.InputSchema)
}

// FunctionTools converts tools to OpenAI function tools.
func FunctionTools(tools []Tool) []art.Tool {
	out := make([]art.Tool, len(tools))
	for i, t := range tools {
		out[i] = t.FunctionTool()
	}
	return out
}

// Resource is a resource an MCP server offers.
type Resource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mime_type,omitempty"`
}

// Tools lists the server's tools (every page).
func (s *Server) Tools(ctx context.Context) ([]Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.callTimeout())
	defer cancel()
	var tools []Tool
	for t, err := range s.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcprl: list the tools of %s: %w%s", s.name, errWithin(ctx, err, s.opts.callTimeout()), s.note())
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return tools, nil
}

// Resources lists the server's resources (every page). A server without
// resources has none: that is not an error.
func (s *Server) Resources(ctx context.Context) ([]Resource, error) {
	if caps := s.session.InitializeResult().Capabilities; caps == nil || caps.Resources == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.callTimeout())
	defer cancel()
	var out []Resource
	for r, err := range s.session.Resources(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcprl: list the resources of %s: %w%s", s.name, errWithin(ctx, err, s.opts.callTimeout()), s.note())
		}
		out = append(out, Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
	}
	return out, nil
}

// Result is what a tool call returned.
type Result struct {
	// Text is the call's content as text: text parts as they are, other
	// parts (images, resources) described in brackets, or the structured
	// content as JSON when there is no content.
	Text string
	// IsError is set when the tool reported an error (its Text says which).
	IsError bool
}

// Errors of Call that a model can learn from (Agent answers them as the
// tool's result): the call was malformed or did not complete, but the
// connection is fine.
var (
	// ErrBadArguments: the arguments are not a JSON object.
	ErrBadArguments = errors.New("the arguments are not a JSON object")
	// ErrCallTimeout: the tool did not answer within Options.CallTimeout.
	ErrCallTimeout = errors.New("the tool did not answer in time")
	// ErrRejected: the server refused the call with a JSON-RPC error (an
	// unknown tool, invalid parameters).
	ErrRejected = errors.New("the server rejected the call")
)

// Call calls the tool name with arguments (a JSON object; empty means
// none), bounded by Options.CallTimeout. A tool that ran and failed
// returns a Result with IsError. An error means the call did not complete:
// it wraps ErrBadArguments, ErrCallTimeout or ErrRejected when the model's
// call was at fault or the tool hung, and anything else (a broken
// connection, ctx ended) otherwise.
func (s *Server) Call(ctx context.Context, name string, arguments json.RawMessage) (Result, error) {
	var args any = map[string]any{}
	if len(strings.TrimSpace(string(arguments))) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(arguments, &obj); err != nil || obj == nil {
			return Result{}, fmt.Errorf("mcprl: call %s on %s: %w: %s", name, s.name, ErrBadArguments, excerpt(string(arguments)))
		}
		args = obj
	}
	callCtx, cancel := context.WithTimeout(ctx, s.opts.callTimeout())
	defer cancel()
	res, err := s.session.CallTool(callCtx, &mcp.CallToolParams{Name: name, Arguments: args})
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		return Result{Text: resultText(res), IsError: res.IsError}, nil
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("mcprl: call %s on %s: %w", name, s.name, ctx.Err())
	case errors.Is(err, ErrInputStalled):
		// The connection is unusable from now on: say so, not just that
		// this call took too long.
		return Result{}, fmt.Errorf("mcprl: call %s on %s: %w (%s): %w; the connection is lost, restart the server%s",
			name, s.name, ErrCallTimeout, s.opts.callTimeout(), err, s.note())
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return Result{}, fmt.Errorf("mcprl: call %s on %s: %w (%s)", name, s.name, ErrCallTimeout, s.opts.callTimeout())
	case errors.As(err, &werr):
		return Result{}, fmt.Errorf("mcprl: call %s on %s: %w: %w", name, s.name, ErrRejected, err)
	}
	return Result{}, fmt.Errorf("mcprl: call %s on %s: %w%s", name, s.name, err, s.note())
}

// note is the server's recent standard error, for errors.
func (s *Server) note() string {
	if s.proc == nil {
		return ""
	}
	return s.proc.stderrNote()
}

// resultText renders a tool result as the text a model reads.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s]", c.Resource.URI))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	return strings.Join(parts, "\n")
}

func excerpt(s string) string {
	const max = 200
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
