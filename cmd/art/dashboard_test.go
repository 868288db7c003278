package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure `art dashboard` serves the runs of a folder SDK logging wrote, at
// /dashboard/ (and / redirects there), and stops when its context ends.
func TestDashboard(t *testing.T) {
	parquet := loggedStep(t) // <root>/p/models/agent/trajectories/val/0004.parquet
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(parquet))))))
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"dashboard", "--data", root, "--addr", addr}, &stdout, &stderr) }()
	var runs struct {
		Runs []struct{ ID string }
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&runs)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.Request.URL.Path == "/dashboard/" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("dashboard not up after 20s: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/dashboard/api/runs")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&runs)
	resp.Body.Close()
	if len(runs.Runs) != 1 || runs.Runs[0].ID != "p/agent" {
		t.Fatalf("runs %+v; want p/agent", runs)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d; want 0:\n%s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("dashboard did not stop within 20s of cancellation")
	}

	c, _, errOut := runArgs(t, "dashboard", "--data", filepath.Join(root, "nope"))
	if c != 1 || !strings.Contains(errOut, "nope: not a directory (give --data the folder holding <project>/models/<name>") {
		t.Fatalf("missing folder: code %d, stderr %q", c, errOut)
	}
}
