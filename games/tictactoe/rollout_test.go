package tictactoe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/artgo/art"
)

// Ensure Turns reads each move's board and reply back as RolloutWith
// records them: behind a system prompt, and with the outcome appended to
// the last move (Outcome) not taken for a board.
func TestTurns(t *testing.T) {
	var traj art.Trajectory
	boards := []Board{boardOf("........."), boardOf("X...O....")}
	for i, b := range boards {
		var h art.History
		h.AddMessage(art.SystemMsg(Instructions), art.UserMsg(b.Prompt()))
		h.AddChoice(art.Choice{Message: art.AssistantMsg([]string{"1", "9"}[i])})
		traj.AddHistory(h)
	}
	AddOutcome(&traj, Outcome{Win: true, Reward: 1})
	turns := Turns(&traj)
	if len(turns) != 2 {
		t.Fatalf("%d turns; want 2", len(turns))
	}
	for i, want := range []Turn{{boards[0].Prompt(), "1"}, {boards[1].Prompt(), "9"}} {
		if turns[i] != want {
			t.Errorf("turn %d = %q; want %q", i, turns[i], want)
		}
	}
}

// Ensure RolloutWith samples at temperature 1 unless Temperature says
// otherwise. What is checked is the request the rollout sends, so an
// endpoint that records it and always takes cell 5 (then the first free
// one) stands in for a server here; the real server plays through it in
// package demo's tests.
func TestRolloutTemperature(t *testing.T) {
	for _, c := range []struct{ set, want float64 }{{0, 1}, {1.3, 1.3}} {
		var temps []float64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Temperature float64 `json:"temperature"`
				Messages    []struct {
					Content string `json:"content"`
				} `json:"messages"`
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			temps = append(temps, req.Temperature)
			board := req.Messages[len(req.Messages)-1].Content
			move := "5"
			if !strings.Contains(board, "5") {
				move = string(board[strings.IndexAny(board, "123456789")])
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}]}`, move)
		}))
		client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("x"), option.WithMaxRetries(0))
		_, err := RolloutWith(context.Background(), client, "m", 1, RolloutOptions{Temperature: c.set})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(temps) == 0 {
			t.Fatal("no request")
		}
		for _, got := range temps {
			if got != c.want {
				t.Errorf("Temperature %v: a request at %v; want %v", c.set, got, c.want)
			}
		}
	}
}
