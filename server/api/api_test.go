package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/artgo/art"
)

// Ensure each train event encodes only its own fields, in the documented
// shape, and decodes back.
func TestTrainEvent_JSON(t *testing.T) {
	cases := []struct {
		ev   TrainEvent
		want string
	}{
		{TrainEvent{Type: EventProgress, Done: 3, Total: 64}, `{"type":"progress","done":3,"total":64}`},
		{TrainEvent{Type: EventResult, Result: art.TrainResult{Step: 4, Metrics: map[string]float64{"loss/train": 0.5}}},
			`{"type":"result","step":4,"metrics":{"loss/train":0.5},"skipped":false,"skip_reason":""}`},
		{TrainEvent{Type: EventResult, Result: art.TrainResult{Step: 5, Metrics: map[string]float64{}, Skipped: true, SkipReason: "equal rewards"}},
			`{"type":"result","step":5,"metrics":{},"skipped":true,"skip_reason":"equal rewards"}`},
		{TrainEvent{Type: EventError, Message: "boom"}, `{"type":"error","message":"boom"}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.ev)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.ev, b, err, c.want)
			continue
		}
		var back TrainEvent
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, c.ev) {
			t.Errorf("round trip of %s: %+v, %v", b, back, err)
		}
	}
	if _, err := json.Marshal(TrainEvent{Type: "bogus"}); err == nil {
		t.Error("an unknown event type encoded")
	}
	var ev TrainEvent
	if err := json.Unmarshal([]byte(`{"type":"bogus"}`), &ev); err == nil {
		t.Error("an unknown event type decoded")
	}
}
