package mcprl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// process is a server command running in its own process group, with
// pipes to its standard input and output and the tail of its standard
// error.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tail

	done    chan struct{} // closed when Wait has returned
	waitErr error         // Wait's result, set before done closes

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts command in a new process group.
func startProcess(command string, args []string, opts Options) (*process, error) {
	cmd := exec.Command(command, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Dir = opts.Dir
	newProcessGroup(cmd)
	p := &process{cmd: cmd, stderr: &tail{max: 4096}, done: make(chan struct{})}
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(p.stderr, opts.Stderr)
	} else {
		cmd.Stderr = p.stderr
	}
	// A grandchild that keeps standard error open must not keep Wait
	// waiting once the server itself has exited.
	cmd.WaitDelay = time.Second
	// Our own pipe rather than cmd.StdinPipe: its write end is an *os.File
	// that takes a write deadline (see deadlineWriter).
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = pr
	p.stdin = &deadlineWriter{f: pw, timeout: opts.callTimeout()}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	err = cmd.Start()
	pr.Close() // the server holds its own copy
	if err != nil {
		pw.Close()
		return nil, err
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends the server: it closes its input (the MCP way to ask a stdio
// server to exit) and waits up to grace, then signals SIGTERM to the
// process group and waits again, then SIGKILL. Whatever happened, the rest
// of the group is killed at the end: a server's children die with it. It
// returns the server's exit error if it had to be signalled or failed.
func (p *process) stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		exited := p.wait(grace)
		if !exited {
			signalGroup(p.cmd, terminate)
			exited = p.wait(grace)
		}
		if !exited {
			signalGroup(p.cmd, kill)
			exited = p.wait(10 * time.Second)
		}
		signalGroup(p.cmd, kill) // children left by a server that exited
		switch {
		case !exited:
			p.stopErr = fmt.Errorf("process %d did not exit after SIGKILL", p.cmd.Process.Pid)
		case p.waitErr != nil && !signalled(p.waitErr):
			p.stopErr = p.waitErr
		}
	})
	return p.stopErr
}

// wait waits up to d for the process to exit and says whether it did.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// ErrInputStalled is wrapped by the error of a message to a server that
// did not read it within Options.CallTimeout: the server is hung (stopped,
// or stuck without reading its input) and its pipe is full.
var ErrInputStalled = errors.New("the server stopped reading its input")

// deadlineWriter bounds each write to a server's standard input. The MCP
// SDK writes a message to the pipe without a context, so a request larger
// than the pipe's buffer sent to a server that reads nothing would block
// the call, and every later one, for ever, whatever its timeout. A write
// that times out may have sent part of a message, after which the stream
// is corrupt: every later write fails at once with the same error.
type deadlineWriter struct {
	f       *os.File
	timeout time.Duration

	mu      sync.Mutex // serialises writes; guards stalled
	stalled error
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stalled != nil {
		return 0, w.stalled
	}
	if err := w.f.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return 0, err
	}
	n, err := w.f.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.stalled = fmt.Errorf("%w: it took %d of a message's %d bytes in %s", ErrInputStalled, n, len(b), w.timeout)
		err = w.stalled
	}
	return n, err
}

func (w *deadlineWriter) Close() error { return w.f.Close() }

// exitNote explains a server that failed to start: how it ended and its
// last lines of standard error.
func (p *process) exitNote(stopErr error) string {
	var b strings.Builder
	select {
	case <-p.done:
		if p.waitErr != nil {
			fmt.Fprintf(&b, "; the server exited: %v", p.waitErr)
		} else if stopErr == nil {
			b.WriteString("; the server exited")
		}
	default:
	}
	b.WriteString(p.stderrNote())
	return b.String()
}

func (p *process) stderrNote() string {
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		return "; its standard error ends with:\n" + s
	}
	return ""
}

// signalled reports whether err is the exit of a process killed by a
// signal (which stop sent).
func signalled(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
