package native

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/artgo/art/engine/generate"
	"github.com/artgo/art/engine/grammar"
	"github.com/artgo/art/host"
)

// maxCachedGrammars bounds the compiled schemas kept for reuse (a judge
// sends the same schema with every request).
const maxCachedGrammars = 64

// structured holds what constrained decoding needs, built on first use: the
// vocabulary prepared for token masks (once per model), and compiled
// grammars by schema.
type structured struct {
	once     sync.Once
	vocab    *grammar.Vocab
	vocabErr error

	mu       sync.Mutex // guards grammars
	grammars map[string]*grammar.Grammar
}

// constraint returns the per-sequence constraint factory for rf, or a
// *host.RequestError naming the schema problem.
func (h *Host) constraint(rf *host.ResponseFormat) (func() generate.Constraint, error) {
	g, err := h.grammar(rf)
	if err != nil {
		return nil, err
	}
	v, err := h.vocab()
	if err != nil {
		return nil, err
	}
	return func() generate.Constraint { return g.NewMatcher(v) }, nil
}

// vocab returns the vocabulary prepared for constrained decoding, built on
// first use.
func (h *Host) vocab() (*grammar.Vocab, error) {
	st := &h.structured
	// Added tokens (chat markers, tool-call tags) never spell an answer;
	// the end-of-turn ids may come only once the document is complete.
	st.once.Do(func() { st.vocab, st.vocabErr = grammar.NewVocab(h.tok.VocabBytes(), h.folder.StopIDs) })
	if st.vocabErr != nil {
		return nil, fmt.Errorf("native: preparing the vocabulary for structured outputs: %w", st.vocabErr)
	}
	return st.vocab, nil
}

// grammar compiles (or finds) the grammar of rf.
func (h *Host) grammar(rf *host.ResponseFormat) (*grammar.Grammar, error) {
	if rf.Schema == nil {
		return grammar.AnyJSONObject(), nil
	}
	var key bytes.Buffer
	if err := json.Compact(&key, rf.Schema); err != nil {
		return nil, &host.RequestError{Param: "response_format.json_schema.schema", Msg: fmt.Sprintf("the schema is not valid JSON: %v", err)}
	}
	st := &h.structured
	st.mu.Lock()
	g, ok := st.grammars[key.String()]
	st.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := grammar.Compile(key.Bytes())
	if err != nil { // a *grammar.SchemaError naming the keyword, or bad JSON
		return nil, &host.RequestError{Param: "response_format.json_schema.schema", Msg: err.Error()}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.grammars == nil || len(st.grammars) >= maxCachedGrammars {
		st.grammars = map[string]*grammar.Grammar{} // start over: schemas rarely vary
	}
	st.grammars[key.String()] = g
	return g, nil
}
