package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/artgo/art"
	"github.com/artgo/art/mcprl"
)

// memoryPool runs the memory servers rollouts use and reuses them: a
// rollout takes a server with its graph file emptied (the server reads the
// file on every call, so no file is an empty graph) and gives it back once
// its reward was read. Starting node for every rollout would cost more
// than the rollout itself.
type memoryPool struct {
	script, dir string
	opts        mcprl.Options

	mu      sync.Mutex
	started int
	idle    []*memoryServer
}

// memoryServer is a running memory server and the graph file it keeps.
type memoryServer struct {
	*mcprl.Server
	file string
}

// get returns an idle server with an empty graph, or starts one.
func (p *memoryPool) get(ctx context.Context) (*memoryServer, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if err := os.Remove(s.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("empty the graph %s: %w", s.file, err)
		}
		return s, nil
	}
	p.started++
	file := filepath.Join(p.dir, fmt.Sprintf("graph-%d.jsonl", p.started))
	p.mu.Unlock()
	o := p.opts
	o.Env = []string{"MEMORY_FILE_PATH=" + file}
	srv, err := mcprl.Start(ctx, o, "node", p.script)
	if err != nil {
		return nil, err
	}
	return &memoryServer{Server: srv, file: file}, nil
}

// put gives s back for another rollout; a server whose rollout failed is
// stopped instead, its state unknown.
func (p *memoryPool) put(s *memoryServer, ok bool) {
	if !ok {
		s.Close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, s)
}

// close stops every idle server.
func (p *memoryPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.idle {
		s.Close()
	}
	p.idle = nil
}

// teacherTranscripts returns one supervised transcript per task, as
// mcprl.Agent records an episode with tools (which must include
// create_entities): the teacher stores the person with their job as the
// entity type and the fact as an observation, then calls complete_task.
// Every tool result is the real server's answer. With probability noise
// the teacher errs, half the time storing the person without the fact,
// half the time calling complete_task without storing anything, so the
// model it teaches succeeds only some of the time and GRPO has something
// to improve.
func teacherTranscripts(ctx context.Context, pool *memoryPool, tools []mcprl.Tool, tasks []task, noise float64, seed uint64, system string) ([]art.Trajectory, error) {
	if !slices.ContainsFunc(tools, func(t mcprl.Tool) bool { return t.Name == "create_entities" }) {
		return nil, errors.New("the teacher stores facts with create_entities: offer it (--tools)")
	}
	if system == "" {
		system = mcprl.DefaultSystemPrompt
	}
	srv, err := pool.get(ctx)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() { pool.put(srv, ok) }()
	r := rand.New(rand.NewPCG(seed, 0x7eac4e7))
	out := make([]art.Trajectory, 0, len(tasks))
	for i, tk := range tasks {
		t := art.Trajectory{Tools: mcprl.AgentTools(tools)}
		t.AddMessage(art.SystemMsg(system), art.UserMsg(tk.Text))
		observations, store := []string{tk.Fact}, true
		if r.Float64() < noise {
			if r.IntN(2) == 0 {
				observations = []string{}
			} else {
				store = false
			}
		}
		summary := "Nothing to store."
		if store {
			if err := os.Remove(srv.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			args, err := json.Marshal(map[string]any{"entities": []entity{{Name: tk.Person, EntityType: tk.Job, Observations: observations}}})
			if err != nil {
				return nil, err
			}
			res, err := srv.Call(ctx, "create_entities", args)
			if err != nil {
				return nil, fmt.Errorf("teacher transcript %d: %w", i, err)
			}
			id := fmt.Sprintf("call_%d_1", i)
			t.AddMessage(toolCall(id, "create_entities", string(args)), art.ToolMsg(id, res.Text))
			summary = "Stored " + tk.Person + "."
		}
		args, _ := json.Marshal(map[string]string{"summary": summary})
		id := fmt.Sprintf("call_%d_2", i)
		t.AddMessage(toolCall(id, mcprl.CompleteTaskTool, string(args)), art.ToolMsg(id, "Task marked complete."))
		out = append(out, t)
	}
	ok = true
	return out, nil
}

// entity is an entity of the memory server's graph, its fields in the
// server's order.
type entity struct {
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
}

func toolCall(id, name, args string) art.Message {
	return art.Message{Role: art.RoleAssistant, ToolCalls: []art.ToolCall{{ID: id, Type: "function",
		Function: art.FunctionCall{Name: name, Arguments: args}}}}
}

// grade rewards a task by the graph file the server left: 0.5 when it
// holds the person, 0.4 more when the person carries the fact, 0.1 more
// when the agent called complete_task. stored says whether the fact was.
func grade(file string, t task, completed bool) (reward float64, stored bool) {
	if completed {
		reward += 0.1
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return reward, false // nothing was stored
	}
	best := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Type string `json:"type"`
			entity
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "entity" || !strings.EqualFold(strings.TrimSpace(e.Name), t.Person) {
			continue
		}
		score := 0.5
		for _, o := range e.Observations {
			if strings.Contains(strings.ToLower(o), t.Fact) {
				score = 0.9
			}
		}
		best = max(best, score)
	}
	return reward + best, best == 0.9
}
