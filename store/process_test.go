package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Child processes: the test binary re-executes itself with these variables
// set, and TestMain runs the child's job instead of the tests.
const (
	childModeEnv = "STORE_TEST_CHILD"
	childDirEnv  = "STORE_TEST_DIR"
	childNameEnv = "STORE_TEST_WRITER"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

func runChild(mode string) int {
	d, err := New(os.Getenv(childDirEnv), "proj", "model-1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch mode {
	case "append":
		if err := appendRows(d, os.Getenv(childNameEnv), 4, 15); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "append-trajectories":
		if err := appendTrajectoryGroups(d, os.Getenv(childNameEnv), 3, 5); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "churn":
		// Rewrite state.json and model.json and append history forever; the
		// parent kills us at a random moment.
		for i := 0; ; i++ {
			letter := "ab"[i%2 : i%2+1]
			if err := d.OverwriteState(bigState(letter)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := d.WriteModel(map[string]any{"letter": letter, "pad": strings.Repeat(letter, 64<<10)}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := appendRows(d, "churn", 2, 1); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if i == 0 {
				fmt.Println("ready")
			}
		}
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

const statePad = 256 << 10

func bigState(letter string) map[string]any {
	return map[string]any{"letter": letter, "pad": strings.Repeat(letter, statePad)}
}

func childCmd(t *testing.T, base, mode, writer string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childDirEnv+"="+base, childNameEnv+"="+writer)
	cmd.Stderr = os.Stderr
	return cmd
}

// runChildren runs two child processes doing mode at once on one model
// folder and returns it.
func runChildren(t *testing.T, mode string) *ModelDir {
	t.Helper()
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("cross-process locking needs flock")
	}
	base := t.TempDir()
	var cmds []*exec.Cmd
	for i := range 2 {
		cmd := childCmd(t, base, mode, "p"+strconv.Itoa(i))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	d, _ := New(base, "proj", "model-1")
	return d
}

// Ensure two processes appending at once (each with several goroutines)
// produce only whole lines, none lost.
func TestAppendHistory_ConcurrentProcesses(t *testing.T) {
	d := runChildren(t, "append")
	if got, want := checkWholeLines(t, d), 2*4*15; got != want {
		t.Fatalf("got %d rows; want %d", got, want)
	}
}

// Ensure two processes appending trajectories to one file at once (each
// with several goroutines) lose no row.
func TestAppendTrajectories_ConcurrentProcesses(t *testing.T) {
	d := runChildren(t, "append-trajectories")
	checkAppendedGroups(t, d, 2*3*5)
}

// Ensure files written by a process that is SIGKILLed mid-write hold either
// the old or the new content, and history.jsonl only whole lines.
func TestWrites_SurviveKilledProcess(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs SIGKILL and flock")
	}
	base := t.TempDir()
	d, _ := New(base, "proj", "model-1")
	delays := []time.Duration{0, 3 * time.Millisecond, 11 * time.Millisecond, 23 * time.Millisecond, 41 * time.Millisecond}
	for round, delay := range delays {
		cmd := childCmd(t, base, "churn", "churn")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "ready\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child said %q, %v; want ready", round, line, err)
		}
		time.Sleep(delay)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("round %d: child exit: %v; want killed", round, err)
		}

		state, err := d.ReadState()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		letter, _ := state["letter"].(string)
		pad, _ := state["pad"].(string)
		if (letter != "a" && letter != "b") || len(pad) != statePad || strings.Trim(pad, letter) != "" {
			t.Fatalf("round %d: state.json is neither the old nor the new content: letter %q, pad of %d bytes", round, letter, len(pad))
		}
		var model map[string]any
		if err := d.ReadModel(&model); err != nil {
			t.Fatalf("round %d: model.json unreadable after kill: %v", round, err)
		}
		checkWholeLines(t, d)
	}
	// A last append must leave a file whose every line is whole: any torn
	// tail from the kills is gone.
	if err := appendRows(d, "final", 1, 1); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(d.Path(), HistoryFile))
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.HasSuffix(line, "}") {
			t.Fatalf("line %d of history.jsonl is not whole (%d bytes)", i+1, len(line))
		}
	}
}

// checkZstd fails unless every column chunk of the parquet file at path is
// ZSTD-compressed.
func checkZstd(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	md := pf.Metadata()
	if len(md.RowGroups) == 0 {
		t.Fatal("no row groups")
	}
	for _, rg := range md.RowGroups {
		for _, c := range rg.Columns {
			if c.MetaData.Codec != format.Zstd {
				t.Fatalf("column %v codec %v; want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
}
