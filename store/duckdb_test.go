package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/artgo/art/internal/testassets"
)

// duckDB runs SQL statements in DuckDB (testdata/duckdb.mjs) and decodes
// the last one's rows into out.
func duckDB(t *testing.T, out any, sql ...string) {
	t.Helper()
	dir := testassets.Dir(t, testassets.DuckDB)
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("ART_REQUIRE_ASSETS") == "1" {
			t.Fatal("node not found")
		}
		t.Skip("node not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join("testdata", "duckdb.mjs")}, sql...)...)
	cmd.Env = append(os.Environ(), "ART_DUCKDB="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb.mjs: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("duckdb.mjs printed %.300s: %v", stdout, err)
	}
}

// duckRow is a TrajectoryRow as DuckDB prints it (BIGINT as a string, nulls
// as null).
type duckRow struct {
	GroupIndex    int64    `json:"group_index,string"`
	GroupMetadata string   `json:"group_metadata"`
	GroupMetrics  string   `json:"group_metrics"`
	GroupLogs     []string `json:"group_logs"`
	Reward        float64  `json:"reward"`
	Metrics       string   `json:"metrics"`
	Metadata      string   `json:"metadata"`
	Tools         string   `json:"tools"`
	Logs          []string `json:"logs"`
	Messages      []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCalls  string `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
		Trainable  bool   `json:"trainable"`
		Logprobs   []struct {
			TokenID int64   `json:"token_id,string"`
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
		} `json:"logprobs"`
	} `json:"messages"`
}

func (d duckRow) row() TrajectoryRow {
	r := TrajectoryRow{GroupIndex: d.GroupIndex, GroupMetadata: d.GroupMetadata, GroupMetrics: d.GroupMetrics,
		GroupLogs: d.GroupLogs, Reward: d.Reward, Metrics: d.Metrics, Metadata: d.Metadata, Tools: d.Tools, Logs: d.Logs}
	for _, m := range d.Messages {
		msg := MessageRow{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Trainable: m.Trainable}
		for _, lp := range m.Logprobs {
			msg.Logprobs = append(msg.Logprobs, TokenRow{TokenID: lp.TokenID, Token: lp.Token, Logprob: lp.Logprob})
		}
		r.Messages = append(r.Messages, msg)
	}
	return r
}

// TestTrajectories_DuckDBReadsOurs: ART reads its trajectories with DuckDB,
// so DuckDB must read every column of ours as written, logprobs included.
func TestTrajectories_DuckDBReadsOurs(t *testing.T) {
	d, err := New(t.TempDir(), "p", "m")
	if err != nil {
		t.Fatal(err)
	}
	rows := []TrajectoryRow{
		{GroupIndex: 0, GroupMetadata: `{"k":"v"}`, GroupMetrics: `{"m":1}`, GroupLogs: []string{"g"}, Reward: 1,
			Metrics: `{"win":1}`, Metadata: `{"id":"a"}`, Tools: `[{"type":"function"}]`, Logs: []string{"a", "b"},
			Messages: []MessageRow{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "3", Trainable: true,
				Logprobs: []TokenRow{{TokenID: 18, Token: "3", Logprob: -0.5}, {TokenID: -1, Token: "é", Logprob: -1.25}}}}},
		{GroupIndex: 1, Reward: -0.5, Messages: []MessageRow{
			{Role: "assistant", ToolCalls: `[{"id":"c"}]`, Trainable: true},
			{Role: "tool", Content: "42", ToolCallID: "c"}}},
	}
	if err := d.WriteTrajectories("train", 3, rows); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteTrajectories("val", 3, rows[:1]); err != nil {
		t.Fatal(err)
	}
	var got []duckRow
	duckDB(t, &got, fmt.Sprintf("SELECT * FROM read_parquet('%s') ORDER BY group_index", d.TrajectoriesPath("train", 3)))
	if len(got) != len(rows) {
		t.Fatalf("DuckDB read %d rows, want %d", len(got), len(rows))
	}
	for i, g := range got {
		if !reflect.DeepEqual(g.row(), rows[i]) {
			t.Errorf("DuckDB read row %d as\n%+v\nwant\n%+v", i, g.row(), rows[i])
		}
	}
	// ART's own kind of query: every split's files at once, metrics as JSON.
	var sums []struct {
		N    int64   `json:"n,string"`
		Wins float64 `json:"wins"`
	}
	duckDB(t, &sums, fmt.Sprintf("SELECT count(*) AS n, sum((metrics::JSON->>'win')::DOUBLE) AS wins FROM read_parquet('%s')",
		filepath.Join(d.Path(), TrajectoriesDir, "*", "*.parquet")))
	if len(sums) != 1 || sums[0].N != 3 || sums[0].Wins != 2 {
		t.Fatalf("DuckDB over both splits: %+v; want 3 rows and 2 wins", sums)
	}
}

// TestTrajectories_ReadsDuckDBs reads files DuckDB wrote in ART's schema
// (nullable columns and list elements, as pyarrow writes them; no logprobs
// column), with each compression and page format the reader accepts and
// several row groups: every value as written, and Logprobs nil (parquet-go
// alone gives each message of such a file one zero token).
func TestTrajectories_ReadsDuckDBs(t *testing.T) {
	const n = 3000
	want := make([]TrajectoryRow, n)
	for i := range want {
		r := TrajectoryRow{GroupIndex: int64(i), Reward: float64(i) / 8, Metrics: fmt.Sprintf(`{"win":%d}`, i%2),
			Tools: "[]", Logs: []string{fmt.Sprintf("log %d", i)}}
		if i%3 != 0 {
			r.GroupMetadata = fmt.Sprintf(`{"g":%d}`, i)
		}
		if i%2 == 0 {
			r.GroupLogs = []string{fmt.Sprintf("x%d", i)}
		} else {
			r.GroupLogs = []string{}
		}
		answer := ""
		if i%5 != 0 {
			answer = fmt.Sprintf("a%d", i)
		}
		r.Messages = []MessageRow{{Role: "user", Content: fmt.Sprintf("q%d", i)}, {Role: "assistant", Content: answer, Trainable: true}}
		want[i] = r
	}
	const art = `SELECT i::BIGINT AS group_index,
		CASE WHEN i % 3 = 0 THEN NULL ELSE '{"g":' || i || '}' END AS group_metadata,
		NULL::VARCHAR AS group_metrics,
		CASE WHEN i % 2 = 0 THEN ['x' || i] ELSE []::VARCHAR[] END AS group_logs,
		i / 8 AS reward,
		'{"win":' || (i % 2) || '}' AS metrics,
		NULL::VARCHAR AS metadata,
		'[]' AS tools,
		['log ' || i] AS logs,
		[{'role': 'user', 'content': 'q' || i, 'tool_calls': NULL::VARCHAR, 'tool_call_id': NULL::VARCHAR, 'trainable': false},
		 {'role': 'assistant', 'content': CASE WHEN i % 5 = 0 THEN NULL ELSE 'a' || i END, 'tool_calls': NULL::VARCHAR, 'tool_call_id': NULL::VARCHAR, 'trainable': true}] AS messages
		FROM range(3000) t(i)`
	for _, options := range []string{"COMPRESSION zstd", "COMPRESSION zstd, PARQUET_VERSION v2", "COMPRESSION snappy", "COMPRESSION uncompressed"} {
		t.Run(options, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "0001.parquet")
			var out []map[string]any
			duckDB(t, &out, fmt.Sprintf("COPY (%s) TO '%s' (FORMAT parquet, %s, ROW_GROUP_SIZE 1024)", art, path, options))
			got, err := ReadTrajectoriesFile(path)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b TrajectoryRow) int { return int(a.GroupIndex - b.GroupIndex) })
			if len(got) != n {
				t.Fatalf("read %d rows, want %d", len(got), n)
			}
			bad := 0
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					if bad++; bad <= 3 {
						t.Errorf("row %d read as\n%+v\nwant\n%+v", i, got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d rows differ", bad, n)
			}
		})
	}
}
