package mcprl

import (
	"context"
	"strings"
	"testing"
)

// Ensure an agent that cannot run says why before it samples a turn: a
// nil server used to panic after the model's first turn, a negative
// MaxTurns ran as 10.
func TestAgentRun_BadInput(t *testing.T) {
	for _, c := range []struct {
		agent Agent
		srv   *Server
		want  string
	}{
		{Agent{Model: "m"}, nil, "nil server"},
		{Agent{}, &Server{}, "no Model"},
		{Agent{Model: "m", MaxTurns: -1}, &Server{}, "MaxTurns = -1"},
	} {
		if _, err := c.agent.Run(context.Background(), c.srv, nil, "task"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v): error %v; want one saying %q", c.agent, err, c.want)
		}
	}
}
