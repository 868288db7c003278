package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/artgo/art"
	"github.com/artgo/art/arttest"
	"github.com/artgo/art/backend/local"
	"github.com/artgo/art/backend/remote"
	"github.com/artgo/art/engine/initmodel"
	"github.com/artgo/art/engine/kernels"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/train"
	"github.com/artgo/art/store"
)

// runArtEnv, when set in a child of the test binary, makes that child the
// `art` command itself, run with the JSON list of arguments it holds: the
// fault tests kill and restart a real `art serve` process.
const runArtEnv = "ART_TEST_RUN_ART"

func TestMain(m *testing.M) {
	if dirs := os.Getenv(localLoopEnv); dirs != "" {
		base, data, _ := strings.Cut(dirs, "|")
		if err := localTrainingLoop(base, data); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if args := os.Getenv(runArtEnv); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, argv, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// faultModel is a tiny random model (byte tokenizer) at base, and the store
// of its run agent in project p under data.
type faultModel struct {
	base, data string
	dir        *store.ModelDir
	cfg        model.Config
}

// newFaultModel writes the model under root.
func newFaultModel(t *testing.T, root string) faultModel {
	t.Helper()
	f := faultModel{base: filepath.Join(root, "base"), data: filepath.Join(root, ".art")}
	if _, err := initmodel.Write(f.base, initmodel.Options{Arch: "qwen2", Shape: "tiny", Tokenizer: initmodel.ByteTokenizer, DType: kernels.F32, Seed: 1, Std: 0.2}); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.cfg, err = model.ReadConfig(f.base); err != nil {
		t.Fatal(err)
	}
	if f.dir, err = store.New(f.data, "p", "agent"); err != nil {
		t.Fatal(err)
	}
	return f
}

// localLoopEnv, when set to "BASE|DATA" in a child of the test binary, makes
// the child a user's training loop on the in-process backend: it resumes at
// the stored step and trains and logs until it is killed, printing
// "resumed N" and then "trained N" and "logged N" as each call returns.
const localLoopEnv = "ART_TEST_LOCAL_LOOP"

func localTrainingLoop(base, data string) error {
	ctx := context.Background()
	b := local.New(local.Options{Path: data, Quiet: true, Seed: 1})
	defer b.Close()
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p"}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		return err
	}
	step, err := m.Step(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("resumed %d\n", step)
	client, err := m.OpenAIClient()
	if err != nil {
		return err
	}
	groups, err := arttest.SampleGroups(ctx, client, m.InferenceName(0), "play", 24, 24)
	if err != nil {
		return err
	}
	for {
		res, err := m.Train(ctx, groups, art.TrainConfig{LearningRate: 1e-3})
		if err != nil {
			return err
		}
		fmt.Printf("trained %d\n", res.Step)
	}
}

// serveProcess is `art serve` running in a child process.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	exited chan error
}

func startServe(t *testing.T, base, data, addr string) *serveProcess {
	t.Helper()
	return startServeWith(t, os.Args[0], base, data, addr, nil)
}

// startServeWith runs `art serve` from the test binary bin, with setup, if
// set, applied to the command before it starts.
func startServeWith(t *testing.T, bin, base, data, addr string, setup func(*exec.Cmd)) *serveProcess {
	t.Helper()
	argv, _ := json.Marshal([]string{"serve", "--base-model", base, "--name", "agent", "--project", "p", "--addr", addr, "--data", data})
	p := &serveProcess{cmd: exec.Command(bin, "-test.run=^$"), url: "http://" + addr, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), runArtEnv+"="+string(argv))
	p.cmd.Stderr = p.stderr
	if setup != nil {
		setup(p.cmd)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("art serve exited (%v):\n%s", err, p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("art serve not healthy after 30s:\n%s", p.stderr.String())
		}
	}
}

// kill9 kills the server the hard way and waits until it is gone.
func (p *serveProcess) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("art serve still running 10s after SIGKILL")
	}
}

// training reports whether a training step is running on the server.
func (p *serveProcess) training() bool {
	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(b), "\nart_training 1\n")
}

// faultGroups samples groups from the served model: enough sequences that
// a training step lasts long enough to be killed in the middle.
func faultGroups(t *testing.T, m *art.TrainableModel, n int) []art.TrajectoryGroup {
	t.Helper()
	client, err := m.OpenAIClient()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := arttest.SampleGroups(context.Background(), client, m.InferenceName(0), "play", n, 24)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// checkpointHashes checks that every checkpoint on disk loads (adapter and
// optimizer state) and returns a hash of each one's files by step.
func checkpointHashes(t *testing.T, d *store.ModelDir, cfg model.Config) map[int][32]byte {
	t.Helper()
	steps, err := d.ListCheckpoints()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][32]byte{}
	for _, st := range steps {
		dir := d.CheckpointDir(st)
		if _, _, err := train.LoadCheckpoint(dir, cfg); err != nil {
			t.Fatalf("checkpoint %d does not load after the kill: %v", st, err)
		}
		h := sha256.New()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
			h.Write(b)
		}
		out[st] = [32]byte(h.Sum(nil))
	}
	return out
}

// Ensure a training loop driven through backend/remote survives `art serve`
// being killed with SIGKILL at random moments of its training steps (GRPO,
// and supervised fine-tuning in one round) and logging: the client gets an
// error, not a hang, while the server is down; after a restart the loop
// resumes at the last complete step; every
// checkpoint on disk loads and the complete ones are unchanged by the
// restart; history.jsonl has no corrupt line, and every log call that
// succeeded is in it exactly once, with a readable trajectories file.
func TestKillServeDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills art serve several times")
	}
	f := newFaultModel(t, t.TempDir())
	base, data, dir, cfg := f.base, f.data, f.dir, f.cfg
	addr := freeAddr(t)
	ctx := context.Background()
	srv := startServe(t, base, data, addr)
	// b gives up on an unreachable server after 2s of retries; patient
	// waits up to a minute, long enough for a restart.
	b, err := remote.New(remote.Options{BaseURL: "http://" + addr, Quiet: true, Timeout: 20 * time.Second, RetryFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	patient, err := remote.New(remote.Options{BaseURL: "http://" + addr, Quiet: true, RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m := &art.TrainableModel{Model: art.Model{Name: "agent", Project: "p", BasePath: t.TempDir()}, BaseModel: base}
	if err := m.Register(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := patient.Register(ctx, m); err != nil {
		t.Fatal(err)
	}
	groups := faultGroups(t, m, 24)
	tcfg := art.TrainConfig{LearningRate: 1e-3}
	var sftSet []art.Trajectory
	for _, g := range groups {
		sftSet = append(sftSet, g.Trajectories...)
	}

	logged := map[int]int{} // step -> successful log calls
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 4 {
		// The loop a user runs: resume at the server's step, train, log.
		step, err := b.Step(ctx, m)
		if err != nil {
			t.Fatalf("round %d: step after restart: %v", round, err)
		}
		before := checkpointHashes(t, dir, cfg)
		type outcome struct {
			trained []int
			err     error
		}
		done := make(chan outcome, 1)
		lap := make(chan time.Duration, 64) // the time of each completed train + log
		go func() {
			var o outcome
			for range 50 {
				t0 := time.Now()
				var res art.TrainResult
				var err error
				if round == 2 { // this round's kill lands in supervised fine-tuning
					res, err = b.TrainSFT(ctx, m, sftSet, art.TrainSFTConfig{LearningRate: 1e-3, BatchSize: 4})
				} else {
					res, err = b.Train(ctx, m, groups, tcfg)
				}
				if err != nil {
					o.err = err
					break
				}
				o.trained = append(o.trained, res.Step)
				s := res.Step
				if _, err := b.Log(ctx, m, groups[:2], art.LogOptions{Split: "val", Step: &s, Metrics: map[string]float64{"round": float64(round)}}); err != nil {
					o.err = err
					break
				}
				logged[s]++
				lap <- time.Since(t0)
			}
			done <- o
		}()
		// Kill at a random moment: the first round right in a training
		// step, the others anywhere in the train/log loop after its first
		// lap (scaled by that lap, so a slow machine or the race detector
		// still kills mid-loop).
		if round == 0 {
			for deadline := time.Now().Add(20 * time.Second); !srv.training(); {
				if time.Now().After(deadline) {
					t.Fatal("no training step seen running")
				}
				time.Sleep(time.Millisecond)
			}
		} else {
			select {
			case d := <-lap:
				time.Sleep(time.Duration(rng.Float64() * 1.5 * float64(d)))
			case o := <-done:
				t.Fatalf("round %d: the loop stopped before its first step: %v", round, o.err)
			case <-time.After(3 * time.Minute):
				t.Fatalf("round %d: no step completed in 3 minutes", round)
			}
		}
		srv.kill9(t)
		var o outcome
		select {
		case o = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the client hangs after the server was killed", round)
		}
		if o.err == nil {
			t.Fatalf("round %d: the loop finished 50 steps before the kill; make steps slower", round)
		}
		t.Logf("round %d: from step %d, %d steps completed, then: %v", round, step, len(o.trained), o.err)

		// While the server is down, a read is retried for its bound and
		// then fails with a clear error; a patient read started now
		// succeeds once the server is back.
		start := time.Now()
		if _, err := b.Step(ctx, m); !errors.Is(err, remote.ErrUnreachable) {
			t.Errorf("round %d: Step while the server is down: %v; want ErrUnreachable", round, err)
		}
		if d := time.Since(start); d < time.Second || d > 8*time.Second {
			t.Errorf("round %d: Step failed after %s while the server was down; want about its 2s of retries", round, d)
		}
		patientStep := make(chan error, 1)
		go func() {
			_, err := patient.Step(ctx, m)
			patientStep <- err
		}()

		after := checkpointHashes(t, dir, cfg)
		for st, h := range before {
			if after[st] != h {
				t.Errorf("round %d: checkpoint %d changed while being killed", round, st)
			}
		}
		srv = startServe(t, base, data, addr)
		select {
		case err := <-patientStep:
			if err != nil {
				t.Errorf("round %d: a Step that began while the server was down: %v", round, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("round %d: a Step that began while the server was down still waits after the restart", round)
		}
		resumed, err := b.Step(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		last := step
		if n := len(o.trained); n > 0 {
			last = o.trained[n-1]
		}
		// The step in flight may have landed before the kill, its answer
		// lost: the server is then one ahead of what the client saw.
		if resumed != last && resumed != last+1 {
			t.Errorf("round %d: resumed at step %d; the last completed step the client saw is %d", round, resumed, last)
		}
		if restarted := checkpointHashes(t, dir, cfg); len(restarted) != len(after) {
			t.Errorf("round %d: %d checkpoints after the restart, %d before it", round, len(restarted), len(after))
		}
		entries, _ := os.ReadDir(filepath.Join(dir.Path(), store.CheckpointsDir))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				t.Errorf("round %d: %s left in the checkpoints folder after the restart", round, e.Name())
			}
		}
	}

	rows, err := dir.ReadHistory()
	if err != nil {
		t.Fatalf("history after the kills: %v", err)
	}
	seen := map[int]int{}
	for _, r := range rows {
		if _, ok := r["val/round"]; ok {
			seen[int(r["step"].(float64))]++
		}
	}
	for st, n := range logged {
		if seen[st] != n {
			t.Errorf("step %d: logged %d time(s), %d row(s) in history.jsonl", st, n, seen[st])
		}
		if _, err := dir.ReadTrajectories("val", st); err != nil {
			t.Errorf("step %d: trajectories: %v", st, err)
		}
	}
	if len(logged) == 0 {
		t.Error("no log call completed in any round")
	}
}

// Ensure a training loop on the in-process backend, killed with SIGKILL at
// random moments, resumes where it stopped: each restart starts at the last
// step it saw complete (or one later, when the kill came after the step
// landed but before the loop heard of it), every checkpoint loads, and
// history.jsonl holds exactly one train row per completed step.
func TestKillLocalBackendDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills training processes")
	}
	f := newFaultModel(t, t.TempDir())
	base, data, dir, cfg := f.base, f.data, f.dir, f.cfg
	rng := rand.New(rand.NewPCG(3, 4))
	last, completed := 0, map[int]bool{}
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), localLoopEnv+"="+base+"|"+data)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			for sc := bufio.NewScanner(stdout); sc.Scan(); {
				lines <- sc.Text()
			}
		}()
		var resumed int
		select {
		case l := <-lines:
			if _, err := fmt.Sscanf(l, "resumed %d", &resumed); err != nil {
				t.Fatalf("round %d: first line %q:\n%s", round, l, stderr.String())
			}
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("round %d: the loop did not start:\n%s", round, stderr.String())
		}
		if resumed != last && resumed != last+1 {
			t.Errorf("round %d: resumed at step %d; the last step seen complete is %d", round, resumed, last)
		}
		last = resumed
		// Kill at a random moment after the first step of the round, scaled
		// by that step's time (a slow machine or the race detector still
		// kills mid-loop).
		var kill <-chan time.Time
		lapStart := time.Now()
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("round %d: the loop ended on its own:\n%s", round, stderr.String())
				}
				var s int
				if _, err := fmt.Sscanf(l, "trained %d", &s); err == nil {
					last, completed[s] = s, true
					if kill == nil {
						kill = time.After(time.Duration(rng.Float64() * 1.5 * float64(time.Since(lapStart))))
					}
				}
			case <-time.After(3 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("round %d: no step completed in 3 minutes:\n%s", round, stderr.String())
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()
				break read
			}
		}
		checkpointHashes(t, dir, cfg)
		t.Logf("round %d: resumed at %d, killed after step %d", round, resumed, last)
	}
	rows, err := dir.ReadHistory()
	if err != nil {
		t.Fatalf("history after the kills: %v", err)
	}
	perStep := map[int]int{}
	for _, r := range rows {
		for k := range r {
			if strings.HasPrefix(k, "train/") {
				perStep[int(r["step"].(float64))]++
				break
			}
		}
	}
	for s, n := range perStep {
		if n != 1 {
			t.Errorf("step %d has %d train rows in history.jsonl", s, n)
		}
	}
	for s := range completed {
		if perStep[s] != 1 {
			t.Errorf("step %d completed but has %d train rows", s, perStep[s])
		}
	}
	if len(completed) == 0 {
		t.Error("no step completed in any round")
	}
}
