package demo

import (
	"fmt"
	"math"
	"testing"

	"github.com/artgo/art/engine/lora"
	"github.com/artgo/art/engine/model"
	"github.com/artgo/art/engine/tokenizer"
)

func TestDbgAdapters(t *testing.T) {
	base := "/tmp/demo-art/demo/base-tictactoe"
	m, err := model.Load(base)
	if err != nil {
		t.Skip(err)
	}
	tok, _ := tokenizer.LoadDir(base)
	ids := tok.Encode("<|im_start|>system\nTic-tac-toe as X. Reply with an empty cell, 1-9.<|im_end|>\n<|im_start|>user\nX..\n.O.\n...\nfree: 3 2 6 8 9 4 7<|im_end|>\n<|im_start|>assistant\n7<|im_end|>")
	for _, st := range []string{"0000", "0001", "0005"} {
		a, err := lora.Load("/tmp/demo-art/demo/models/tictactoe/checkpoints/"+st, m.Config)
		if err != nil {
			t.Fatal(err)
		}
		var mx float64
		for _, p := range a.Params() {
			mx = math.Max(mx, math.Abs(float64(p)))
		}
		lp, _ := m.LogProbs(ids, a)
		fmt.Printf("%s max|param| %.4f lp(answer) %.4f lp(end) %.4f\n", st, mx, lp[len(lp)-2], lp[len(lp)-1])
	}
}
