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
// create_entities): in one turn the teacher stores the person as an
// entity of type "person" with the fact as its observation, and calls
// complete_task. Every tool result is the real server's answer. With
// probability noise the teacher errs, half the time storing the person
// without the fact, half the time calling complete_task without storing
// anything, so the model it teaches succeeds only some of the time and
// GRPO has something to improve.
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
		turn := art.Message{Role: art.RoleAssistant}
		var results []art.Message
		summary := "Nothing to store."
		if store {
			if err := os.Remove(srv.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			args, err := json.Marshal(map[string]any{"entities": []entity{{Name: tk.Person, EntityType: "person", Observations: observations}}})
			if err != nil {
				return nil, err
			}
			res, err := srv.Call(ctx, "create_entities", args)
			if err != nil {
				return nil, fmt.Errorf("teacher transcript %d: %w", i, err)
			}
			id := fmt.Sprintf("call_%d_1", i)
			turn.ToolCalls = append(turn.ToolCalls, toolCall(id, "create_entities", string(args)))
			results = append(results, art.ToolMsg(id, res.Text))
			summary = "Stored."
		}
		args, _ := json.Marshal(map[string]string{"summary": summary})
		id := fmt.Sprintf("call_%d_2", i)
		turn.ToolCalls = append(turn.ToolCalls, toolCall(id, mcprl.CompleteTaskTool, string(args)))
		results = append(results, art.ToolMsg(id, "Task marked complete."))
		t.AddMessage(turn)
		t.AddMessage(results...)
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

func toolCall(id, name, args string) art.ToolCall {
	return art.ToolCall{ID: id, Type: "function", Function: art.FunctionCall{Name: name, Arguments: args}}
}

// grading is what the graph the server saved holds for a task.
type grading struct {
	person bool // an entity named as the task's person (case and surrounding space aside)
	fact   bool // that entity has an observation containing the fact (case aside)
	others int  // entities with other names
}

// reward is what the task asked for and nothing else: 1 when the person
// is stored with the fact, 0.5 when the person is stored without it, 0
// otherwise. Calling complete_task earns nothing by itself (a bonus for it
// was learned as a shortcut: complete at once, store nothing), and other
// entities are not penalised (they are counted, in the other_entities
// metric).
func (g grading) reward() float64 {
	switch {
	case g.fact:
		return 1
	case g.person:
		return 0.5
	}
	return 0
}

// grade reads the graph file the server left after a task.
func grade(file string, t task) grading {
	var g grading
	b, err := os.ReadFile(file)
	if err != nil {
		return g // nothing was stored
	}
	for _, line := range strings.Split(string(b), "\n") {
		var e struct {
			Type string `json:"type"`
			entity
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "entity" {
			continue
		}
		if !strings.EqualFold(strings.TrimSpace(e.Name), t.Person) {
			g.others++
			continue
		}
		g.person = true
		for _, o := range e.Observations {
			if strings.Contains(strings.ToLower(o), strings.ToLower(t.Fact)) {
				g.fact = true
			}
		}
	}
	return g
}
