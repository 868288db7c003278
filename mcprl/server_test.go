package mcprl

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/artgo/art/internal/testassets"
)

// serverScript returns the entry point of an npm MCP server installed by
// scripts/install-mcp-servers.sh ("server-memory", "server-everything").
func serverScript(tb testing.TB, name string) string {
	tb.Helper()
	return filepath.Join(testassets.Dir(tb, testassets.MCPServers), "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
}

// startMemory starts a real server-memory whose knowledge graph lives in
// a fresh file, returned with it.
func startMemory(tb testing.TB, opts Options) (*Server, string) {
	tb.Helper()
	file := filepath.Join(tb.TempDir(), "memory.jsonl")
	opts.Env = append(opts.Env, "MEMORY_FILE_PATH="+file)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, opts, "node", serverScript(tb, "server-memory"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	return srv, file
}

func toolNamed(tools []Tool, name string) (Tool, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// Ensure the tools of a real stdio server (server-memory from npm) are
// listed, converted to OpenAI function tools, and called, and that the
// call changes the server's state (its JSON file).
func TestMemoryServer_ToolsAndCalls(t *testing.T) {
	srv, file := startMemory(t, Options{})
	ctx := context.Background()
	tools, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"create_entities", "create_relations", "add_observations", "read_graph", "search_nodes"} {
		if _, ok := toolNamed(tools, name); !ok {
			t.Errorf("no tool %s among %d", name, len(tools))
		}
	}
	for _, ft := range FunctionTools(tools) {
		var schema map[string]any
		if err := json.Unmarshal(ft.Function.Parameters, &schema); err != nil || schema["type"] != "object" || ft.Function.Name == "" {
			t.Errorf("tool %s: parameters %s (%v)", ft.Function.Name, ft.Function.Parameters, err)
		}
	}
	res, err := srv.Call(ctx, "create_entities", json.RawMessage(`{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}`))
	if err != nil || res.IsError {
		t.Fatalf("create_entities: %+v, %v", res, err)
	}
	res, err = srv.Call(ctx, "search_nodes", json.RawMessage(`{"query":"Ada"}`))
	if err != nil || !strings.Contains(res.Text, "first program") {
		t.Fatalf("search_nodes: %+v, %v", res, err)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"Ada"`) {
		t.Fatalf("the memory file holds %q (%v)", b, err)
	}
	if _, err := srv.Call(ctx, "create_entities", json.RawMessage(`[1,2]`)); !errors.Is(err, ErrBadArguments) {
		t.Errorf("array arguments: %v; want ErrBadArguments", err)
	}
	// An unknown tool is a JSON-RPC error or a tool error, as the server
	// chooses; either way the model can read it.
	if res, err := srv.Call(ctx, "no_such_tool", nil); !(errors.Is(err, ErrRejected) || err == nil && res.IsError) {
		t.Errorf("unknown tool: %+v, %v", res, err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// Ensure a real server's resources are listed and that a tool which hangs
// past CallTimeout gives ErrCallTimeout promptly, with the server still
// usable (server-everything's long-running operation).
func TestEverythingServer_ResourcesAndTimeout(t *testing.T) {
	ctx := context.Background()
	srv, err := Start(ctx, Options{CallTimeout: 2 * time.Second}, "node", serverScript(t, "server-everything"), "stdio")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tools, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := toolNamed(tools, "echo"); !ok {
		t.Fatalf("no echo tool among %v", tools)
	}
	res, err := srv.Call(ctx, "echo", json.RawMessage(`{"message":"hello mcp"}`))
	if err != nil || !strings.Contains(res.Text, "hello mcp") {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	resources, err := srv.Resources(ctx)
	if err != nil || len(resources) == 0 {
		t.Fatalf("resources: %d, %v", len(resources), err)
	}
	start := time.Now()
	_, err = srv.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":60,"steps":5}`))
	if !errors.Is(err, ErrCallTimeout) || time.Since(start) > 20*time.Second {
		t.Fatalf("a 60 s operation with a 2 s timeout: %v after %s", err, time.Since(start))
	}
	if res, err := srv.Call(ctx, "echo", json.RawMessage(`{"message":"still here"}`)); err != nil || !strings.Contains(res.Text, "still here") {
		t.Fatalf("echo after a timeout: %+v, %v", res, err)
	}
}

// Ensure a server that cannot start, exits at once, or never answers the
// handshake gives an error that says why, within StartTimeout.
func TestStart_Fails(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{"/nonexistent/mcp-server"}, "no such file"},
		{"exits", []string{"node", "-e", "console.error('cannot open the database'); process.exit(3)"}, "cannot open the database"},
		{"silent", []string{"node", "-e", "setInterval(() => {}, 1000)"}, "no answer within 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			srv, err := Start(ctx, Options{StartTimeout: time.Second, StopTimeout: 500 * time.Millisecond}, tc.args[0], tc.args[1:]...)
			if err == nil {
				srv.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) || time.Since(start) > 15*time.Second {
				t.Errorf("err %v after %s; want %q", err, time.Since(start), tc.want)
			}
		})
	}
}

// Ensure streamable HTTP works against a real server written with the
// go-sdk, served in-process over loopback: tools listed with their
// schemas, a call, and a tool error reported as a result.
func TestStreamableHTTP_GoSDKServer(t *testing.T) {
	type addIn struct {
		A int `json:"a" jsonschema:"the first number"`
		B int `json:"b" jsonschema:"the second number"`
	}
	type addOut struct {
		Sum int `json:"sum"`
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "adder", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers"}, func(ctx context.Context, req *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
		return nil, addOut{Sum: in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return nil, nil, errors.New("the disk is full")
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()

	ctx := context.Background()
	srv, err := Connect(ctx, hs.URL, Options{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tools, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add, ok := toolNamed(tools, "add")
	if !ok || !strings.Contains(string(add.FunctionTool().Function.Parameters), `"a"`) {
		t.Fatalf("tools %+v", tools)
	}
	res, err := srv.Call(ctx, "add", json.RawMessage(`{"a":2,"b":40}`))
	if err != nil || !strings.Contains(res.Text, "42") || res.IsError {
		t.Fatalf("add: %+v, %v", res, err)
	}
	res, err = srv.Call(ctx, "fail", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "the disk is full") {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	if _, err := Connect(ctx, "http://127.0.0.1:1/mcp", Options{StartTimeout: 5 * time.Second}); err == nil {
		t.Error("connected to a closed port")
	}
}
