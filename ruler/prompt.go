package ruler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/artgo/art"
)

// DefaultRubric is the grading standard used when Options.Rubric is empty.
const DefaultRubric = `- A trajectory that achieves its goal always scores well above one that does not.
- Of two trajectories that achieve the goal, the one that gets there more directly (fewer wasted steps, detours or errors) scores higher.
- Make the gap between two scores as large as the gap in their quality: work of nearly equal quality gets nearly equal scores.
- A trajectory that fails but makes real progress toward the goal earns partial credit over one that makes none.`

const systemPrompt = `You judge the work of an AI agent. You are shown several trajectories: attempts by the agent at the same task, each a conversation of messages (and tool calls) in JSON. Work out the agent's goal from the system and user messages, then give each trajectory a score from 0 to 1 for how well it reached that goal, with a short explanation.

Grading standards:
`

// Prompt is a judge request for one group.
type Prompt struct {
	// Messages are the system and user messages sent to the judge.
	Messages []art.Message
	// Expected is the number of scores the judge must return: the number
	// of trajectories, or 1 when they are all identical (the one score is
	// then given to every trajectory).
	Expected int
	// Identical is true when every trajectory is the same.
	Identical bool
}

// NewPrompt builds the judge request for trajectories, each given as its
// histories (the main one first, then any additional ones), with rubric
// ("" means DefaultRubric).
//
// The user message holds, in order: the leading messages every main
// history shares, once, as <context>JSON</context>; the tools of the first
// trajectory as <available_tools>JSON</available_tools>; and "Trajectories:"
// followed by one <trajectory id="i"> block per trajectory (i from 1) with
// the JSON of its main history's remaining messages, then each additional
// history as <history id="k"> (k from 2) with all of its messages. JSON is
// compact, with '<', '>' and '&' written as themselves.
func NewPrompt(trajectories [][]art.History, rubric string) (Prompt, error) {
	if len(trajectories) == 0 {
		return Prompt{}, fmt.Errorf("ruler: no trajectories to score")
	}
	if rubric == "" {
		rubric = DefaultRubric
	}
	for i, hs := range trajectories {
		if len(hs) == 0 {
			return Prompt{}, fmt.Errorf("ruler: trajectory %d has no history", i)
		}
	}
	encoded := make([][][][]byte, len(trajectories)) // trajectory, history, message → JSON
	for i, hs := range trajectories {
		encoded[i] = make([][][]byte, len(hs))
		for h, hist := range hs {
			for _, m := range hist.Messages() {
				b, err := compactJSON(m)
				if err != nil {
					return Prompt{}, fmt.Errorf("ruler: trajectory %d: %w", i, err)
				}
				encoded[i][h] = append(encoded[i][h], b)
			}
		}
	}
	identical := true
	for _, e := range encoded[1:] {
		if !sameTrajectory(e, encoded[0]) {
			identical = false
			break
		}
	}
	p := Prompt{Expected: len(trajectories), Identical: identical}
	subjects := encoded
	prefix := 0
	if identical {
		p.Expected, subjects = 1, encoded[:1]
	} else {
		prefix = commonPrefix(encoded)
	}

	var user strings.Builder
	if prefix > 0 {
		user.WriteString("<context>\n")
		writeList(&user, encoded[0][0][:prefix])
		user.WriteString("\n</context>\n\n")
	}
	if tools := trajectories[0][0].Tools; len(tools) > 0 {
		b, err := compactJSON(tools)
		if err != nil {
			return Prompt{}, fmt.Errorf("ruler: tools: %w", err)
		}
		user.WriteString("<available_tools>\n")
		user.Write(b)
		user.WriteString("\n</available_tools>\n\n")
	}
	user.WriteString("Trajectories:")
	for i, hs := range subjects {
		fmt.Fprintf(&user, "\n\n<trajectory id=\"%d\">\n", i+1)
		writeList(&user, hs[0][prefix:])
		for h, msgs := range hs[1:] {
			fmt.Fprintf(&user, "\n<history id=\"%d\">\n", h+2)
			writeList(&user, msgs)
			user.WriteString("\n</history>")
		}
		user.WriteString("\n</trajectory>")
	}
	p.Messages = []art.Message{art.SystemMsg(systemPrompt + rubric), art.UserMsg(user.String())}
	return p, nil
}

func sameTrajectory(a, b [][][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for h := range a {
		if len(a[h]) != len(b[h]) {
			return false
		}
		for k := range a[h] {
			if !bytes.Equal(a[h][k], b[h][k]) {
				return false
			}
		}
	}
	return true
}

// commonPrefix counts the leading messages identical in every main history.
func commonPrefix(encoded [][][][]byte) int {
	n := len(encoded[0][0])
	for _, e := range encoded[1:] {
		n = min(n, len(e[0]))
		for k := 0; k < n; k++ {
			if !bytes.Equal(e[0][k], encoded[0][0][k]) {
				n = k
				break
			}
		}
	}
	return n
}

func writeList(b *strings.Builder, msgs [][]byte) {
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
}

// compactJSON encodes v compactly with '<', '>' and '&' as themselves
// (json.Marshal, also inside the SDK's MarshalJSON methods, escapes them,
// which a judge reads worse).
func compactJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out = append(out, b[i], b[i+1]) // an escape, kept whole
		i++
	}
	return out, nil
}

// ResponseSchema is the JSON Schema of the judge's answer for n scores,
// within OpenAI's strict subset, as JSON text: its properties are in the
// order the answer must give them (trajectory_id, explanation, score), and
// structured outputs write keys in the schema's order. maxExplanation > 0
// also bounds the length of each explanation (to it) and trajectory_id (to
// 8 characters): for small judges under constrained decoding, which then
// always finish.
func ResponseSchema(n, maxExplanation int) json.RawMessage {
	id, explanation := `{"type":"string"}`, `{"type":"string"}`
	if maxExplanation > 0 {
		id, explanation = `{"type":"string","maxLength":8}`, fmt.Sprintf(`{"type":"string","maxLength":%d}`, maxExplanation)
	}
	return json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"scores":{"type":"array","minItems":%d,"maxItems":%d,`+
		`"items":{"type":"object","properties":{"trajectory_id":%s,"explanation":%s,"score":{"type":"number","minimum":0,"maximum":1}},`+
		`"required":["trajectory_id","explanation","score"],"additionalProperties":false}}},"required":["scores"],"additionalProperties":false}`,
		n, n, id, explanation))
}

// TrajectoryScore is the judge's verdict on one trajectory.
type TrajectoryScore struct {
	TrajectoryID string  `json:"trajectory_id"`
	Explanation  string  `json:"explanation"`
	Score        float64 `json:"score"`
}

// ParseAnswer checks a judge's answer for n trajectories and returns the
// scores in trajectory order. The scores are matched by trajectory_id when
// the ids are exactly "1".."n" in some order, and by position otherwise
// (as the original). An answer that is not JSON of the schema, has another
// number of scores, or a score outside [0, 1], is an error saying so.
func ParseAnswer(content string, n int) ([]TrajectoryScore, error) {
	var a struct {
		Scores []struct {
			TrajectoryID json.RawMessage `json:"trajectory_id"`
			Explanation  string          `json:"explanation"`
			Score        *float64        `json:"score"`
		} `json:"scores"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(content)), &a); err != nil {
		return nil, fmt.Errorf("the answer is not the JSON object asked for: %v", err)
	}
	if len(a.Scores) != n {
		return nil, fmt.Errorf("the answer has %d scores for %d trajectories", len(a.Scores), n)
	}
	out := make([]TrajectoryScore, n)
	byID := true
	seen := make([]bool, n)
	for i, s := range a.Scores {
		if s.Score == nil {
			return nil, fmt.Errorf("score %d has no \"score\"", i+1)
		}
		if v := *s.Score; !(v >= 0 && v <= 1) {
			return nil, fmt.Errorf("score %d is %v, outside [0, 1]", i+1, v)
		}
		var id string
		if json.Unmarshal(s.TrajectoryID, &id) != nil {
			id = strings.Trim(string(s.TrajectoryID), `" `) // a number is tolerated
		}
		out[i] = TrajectoryScore{TrajectoryID: id, Explanation: s.Explanation, Score: *s.Score}
		k, err := strconv.Atoi(id)
		if err != nil || k < 1 || k > n || seen[k-1] {
			byID = false
		} else {
			seen[k-1] = true
		}
	}
	if byID {
		ordered := make([]TrajectoryScore, n)
		for _, s := range out {
			k, _ := strconv.Atoi(s.TrajectoryID)
			ordered[k-1] = s
		}
		out = ordered
	}
	return out, nil
}
