package mcprl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a running process (a zombie is not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// syncBuffer is a bytes.Buffer safe for the server's stderr copier.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startWithChild starts server-everything behind a shell that first
// starts a child of its own (a sleep standing for whatever a server
// spawns) and reports the pids, as `npx` or a wrapper script would.
func startWithChild(t *testing.T, opts Options) (srv *Server, server, child int) {
	t.Helper()
	var stderr syncBuffer
	opts.Stderr = &stderr
	script := `sleep 300 & echo "child=$!" >&2; echo "server=$$" >&2; exec node "$0" stdio`
	srv, err := Start(context.Background(), opts, "sh", "-c", script, serverScript(t, "server-everything"))
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, m := range regexp.MustCompile(`(child|server)=(\d+)`).FindAllStringSubmatch(stderr.String(), -1) {
		pids[m[1]], _ = strconv.Atoi(m[2])
	}
	if pids["child"] == 0 || pids["server"] == 0 || !alive(pids["child"]) || !alive(pids["server"]) {
		srv.Close()
		t.Fatalf("pids %v from %q", pids, stderr.String())
	}
	return srv, pids["server"], pids["child"]
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Ensure Close stops the server's whole process group: the server and a
// child it started, after a normal session.
func TestClose_StopsProcessGroup(t *testing.T) {
	srv, server, child := startWithChild(t, Options{StopTimeout: 500 * time.Millisecond})
	if _, err := srv.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	waitGone(t, server, child)
}

// Ensure a rollout cancelled in the middle of a tool call returns at once
// and that Close then leaves no process behind.
func TestCancelMidCall_LeavesNoProcess(t *testing.T) {
	srv, server, child := startWithChild(t, Options{StopTimeout: 500 * time.Millisecond, CallTimeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	_, err := srv.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":60,"steps":5}`))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("cancelled call: %v after %s", err, time.Since(start))
	}
	srv.Close()
	waitGone(t, server, child)
}

// Ensure streamable HTTP works against a real npm server too:
// server-everything's streamable HTTP transport on a free loopback port.
func TestStreamableHTTP_EverythingServer(t *testing.T) {
	script := serverScript(t, "server-everything")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// The HTTP server is a process of its own here; startProcess gives it
	// the same process-group handling as a stdio server.
	p, err := startProcess("node", []string{script, "streamableHttp"}, Options{Env: []string{"PORT=" + strconv.Itoa(port)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second)
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	ctx := context.Background()
	var srv *Server
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if srv, err = Connect(ctx, url, Options{StartTimeout: 5 * time.Second}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect: %v%s", err, p.stderrNote())
		}
	}
	defer srv.Close()
	tools, err := srv.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := toolNamed(tools, "get-sum"); !ok {
		t.Fatalf("no get-sum among %d tools", len(tools))
	}
	res, err := srv.Call(ctx, "get-sum", json.RawMessage(`{"a":19,"b":23}`))
	if err != nil || !strings.Contains(res.Text, "42") {
		t.Fatalf("get-sum: %+v, %v", res, err)
	}
}

// Ensure a call to a server that has stopped reading its input (stopped
// here with SIGSTOP, as a server stuck in a loop would be) fails within
// CallTimeout even when the request is larger than the pipe's buffer, and
// that Close then stops the server: writing the request must not wait for
// ever on a full pipe.
func TestCall_ServerNotReadingInput(t *testing.T) {
	srv, err := Start(context.Background(), Options{CallTimeout: 2 * time.Second, StopTimeout: 500 * time.Millisecond},
		"node", serverScript(t, "server-everything"), "stdio")
	if err != nil {
		t.Fatal(err)
	}
	pid := srv.proc.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-pid, syscall.SIGKILL)

	done := make(chan error, 1)
	start := time.Now()
	go func() {
		msg, _ := json.Marshal(map[string]string{"message": strings.Repeat("x", 1<<20)}) // 16 pipe buffers
		_, err := srv.Call(context.Background(), "echo", msg)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCallTimeout) {
			t.Errorf("call to a stopped server: %v after %s; want ErrCallTimeout", err, time.Since(start))
		}
		t.Logf("first call: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a server that reads nothing did not return within 20 s (CallTimeout 2 s)")
	}
	// The connection is broken now (half a message may have gone): the
	// next call fails too, promptly.
	go func() {
		_, err := srv.Call(context.Background(), "echo", json.RawMessage(`{"message":"hi"}`))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a call after the stall succeeded")
		}
		t.Logf("second call: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a server that reads nothing did not return within 20 s (CallTimeout 2 s)")
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close of a stopped server did not return within 20 s")
	}
	waitGone(t, pid)
}
