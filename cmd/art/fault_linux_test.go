package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/artgo/art"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/store"
)

// faultSetup starts `art serve` on a fresh tiny model and registers a model
// with a remote backend.
func faultSetup(t *testing.T) (srv *serveProcess, b *remote.Backend, m *art.TrainableModel, dir *store.ModelDir, cfg model.Config) {
	t.Helper()
	f := newFaultModel(t, t.TempDir())
	dir, cfg = f.dir, f.cfg
	addr := freeAddr(t)
	srv = startServe(t, f.base, f.data, addr)
	var err error
	if b, err = remote.New(remote.Options{BaseURL: "http://" + addr, Quiet: true, RetryFor: -1}); err != nil {
		t.Fatal(err)
	}
	m = &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p", BasePath: t.TempDir()}, BaseModel: f.base}
	if err := m.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return srv, b, m, dir, cfg
}

// trainAndLogStep1 trains step 1 on freshly sampled groups and logs them
// as its "val" split.
func trainAndLogStep1(t *testing.T, b *remote.Backend, m *art.TrainableModel) ([]art.TrajectoryGroup, art.TrainConfig) {
	t.Helper()
	ctx := context.Background()
	groups := faultGroups(t, m, 2)
	tcfg := art.TrainConfig{LearningRate: 1e-3}
	if _, err := b.Train(ctx, m, groups, tcfg); err != nil {
		t.Fatal(err)
	}
	one := 1
	if _, err := b.Log(ctx, m, groups, art.LogOptions{Split: "val", Step: &one}); err != nil {
		t.Fatal(err)
	}
	return groups, tcfg
}

// Ensure SIGTERM during a training step lets the step finish and land (the
// client gets its result), then stops the server with exit code 0, as the
// promise "Ctrl-C on the server gracefully saves the latest checkpoint"
// says.
func TestSIGTERMDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("starts art serve")
	}
	srv, b, m, dir, cfg := faultSetup(t)
	groups := faultGroups(t, m, 24)
	type result struct {
		res art.TrainResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := b.Train(context.Background(), m, groups, art.TrainConfig{LearningRate: 1e-3})
		done <- result{res, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); !srv.training(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no training step seen running")
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.res.Step != 1 {
			t.Fatalf("the step in flight at SIGTERM: %+v, %v; want step 1 to land", r.res, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the training call hangs after SIGTERM")
	}
	select {
	case err := <-srv.exited:
		if err != nil {
			t.Fatalf("art serve exited with %v after SIGTERM:\n%s", err, srv.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("art serve still running a minute after SIGTERM")
	}
	if h := checkpointHashes(t, dir, cfg); len(h) != 2 {
		t.Fatalf("%d checkpoints after the graceful stop; want steps 0 and 1", len(h))
	}
	if !strings.Contains(srv.stderr.String(), "serve: stopped") {
		t.Errorf("no clean stop in the log:\n%s", srv.stderr.String())
	}
}

// Ensure a full disk (simulated by lowering the server's file size limit,
// so every write that grows a file fails) makes training and logging fail
// with a clear error while inference goes on, leaves the last good
// checkpoint and history.jsonl intact, and that the same calls succeed
// once there is room again.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts art serve")
	}
	srv, b, m, dir, cfg := faultSetup(t)
	ctx := context.Background()
	groups, tcfg := trainAndLogStep1(t, b, m)
	one := 1
	good := checkpointHashes(t, dir, cfg)
	history, err := os.ReadFile(dir.Path() + "/" + store.HistoryFile)
	if err != nil {
		t.Fatal(err)
	}

	pid := srv.cmd.Process.Pid
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 1, Max: unix.RLIM_INFINITY}, &old); err != nil {
		t.Skipf("cannot lower the server's file size limit: %v", err)
	}
	_, err = b.Train(ctx, m, groups, tcfg)
	if err == nil || !strings.Contains(err.Error(), "file too large") {
		t.Fatalf("training with a full disk: %v; want an error saying the file is too large", err)
	}
	t.Logf("train with a full disk: %v", err)
	if _, err := b.Log(ctx, m, groups, art.LogOptions{Split: "val", Step: &one}); err == nil {
		t.Fatal("logging with a full disk succeeded")
	} else {
		t.Logf("log with a full disk: %v", err)
	}
	if step, err := b.Step(ctx, m); err != nil || step != 1 {
		t.Fatalf("step after the failed save: %d, %v; want 1", step, err)
	}
	faultGroups(t, m, 1) // inference still answers
	if after := checkpointHashes(t, dir, cfg); len(after) != len(good) || after[1] != good[1] {
		t.Fatal("the checkpoints changed while the disk was full")
	}
	if now, _ := os.ReadFile(dir.Path() + "/" + store.HistoryFile); string(now) != string(history) {
		t.Fatalf("history.jsonl changed while the disk was full:\n%s", now)
	}

	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil); err != nil {
		t.Fatal(err)
	}
	res, err := b.Train(ctx, m, groups, tcfg)
	if err != nil || res.Step != 2 {
		t.Fatalf("training once there is room: %+v, %v", res, err)
	}
	two := 2
	if _, err := b.Log(ctx, m, groups, art.LogOptions{Split: "val", Step: &two}); err != nil {
		t.Fatal(err)
	}
	if _, err := dir.ReadHistory(); err != nil {
		t.Fatal(err)
	}
}

// Ensure a data directory the server may not write to makes training and
// logging fail with a clear error while inference goes on, and leaves the
// checkpoints and history.jsonl as they were. Root ignores permissions, so
// as root the server runs as the unprivileged user nobody.
func TestReadOnlyDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("starts art serve")
	}
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} { // the test's temp folders are private
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newFaultModel(t, root)
	base, data, dir, cfg := f.base, f.data, f.dir, f.cfg
	ctx := context.Background()
	addr := freeAddr(t)

	// A first server trains a step and logs it, then stops.
	srv := startServe(t, base, data, addr)
	b, err := remote.New(remote.Options{BaseURL: "http://" + addr, Quiet: true, RetryFor: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p", BasePath: t.TempDir()}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	groups, tcfg := trainAndLogStep1(t, b, m)
	one := 1
	srv.cmd.Process.Signal(syscall.SIGTERM)
	<-srv.exited

	// The data directory becomes read-only for the next server.
	bin := os.Args[0]
	var setup func(*exec.Cmd)
	if os.Geteuid() == 0 {
		const nobody = 65534
		bin = filepath.Join(root, "art.test") // the go-build folder is not nobody's to enter
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		setup = func(c *exec.Cmd) {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			c.Dir = root
		}
	}
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			mode := os.FileMode(0o444)
			if d.IsDir() {
				mode = 0o555
			}
			os.Chmod(p, mode)
		}
		return nil
	})
	t.Cleanup(func() {
		filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
			if err == nil {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	good := checkpointHashes(t, dir, cfg)
	history, err := os.ReadFile(filepath.Join(dir.Path(), store.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	srv = startServeWith(t, bin, base, data, addr, setup)
	if err := m.Register(ctx, b); err != nil {
		t.Fatalf("register against the read-only server: %v", err)
	}
	_, err = b.Train(ctx, m, groups, tcfg)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("training into a read-only directory: %v; want an error saying permission denied", err)
	}
	t.Logf("train into a read-only directory: %v", err)
	if _, err := b.Log(ctx, m, groups, art.LogOptions{Split: "val", Step: &one}); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("logging into a read-only directory: %v", err)
	}
	if step, err := b.Step(ctx, m); err != nil || step != 1 {
		t.Fatalf("step: %d, %v; want 1", step, err)
	}
	faultGroups(t, m, 1) // inference still answers
	if after := checkpointHashes(t, dir, cfg); len(after) != len(good) || after[1] != good[1] {
		t.Fatal("the checkpoints changed")
	}
	if now, _ := os.ReadFile(filepath.Join(dir.Path(), store.HistoryFile)); string(now) != string(history) {
		t.Fatal("history.jsonl changed")
	}
}
