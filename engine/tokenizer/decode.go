package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Decode returns the text of ids: the bytes of their tokens, concatenated.
// Special tokens are included as their content. If ids end, or are cut, in
// the middle of a UTF-8 character the result is not valid UTF-8; it is
// exactly the bytes the tokens stand for, so Decode(Encode(s)) == s for any s
// the normalizer leaves unchanged. Decode fails on an id no token has.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	n := 0
	for i, id := range ids {
		if !t.valid(id) {
			return "", fmt.Errorf("%w %d at index %d", ErrUnknownID, id, i)
		}
		n += len(t.tokens[id])
	}
	var b strings.Builder
	b.Grow(n)
	for _, id := range ids {
		b.WriteString(t.tokens[id])
	}
	return t.stripFirst(b.String()), nil
}

// stripFirst drops the text's first space when the decoder says so
// (Llama 2's, which undoes the "▁" its normalizer prepends).
func (t *Tokenizer) stripFirst(s string) string {
	if t.sp != nil && t.sp.stripFirst {
		s, _ = strings.CutPrefix(s, " ")
	}
	return s
}

// Decoder decodes a stream of token ids, such as a model's sampled output,
// into text without ever splitting a UTF-8 character: a token that ends in
// the middle of a character (byte-level BPE has many) is held back until the
// tokens completing it arrive. Concatenating every Next and the final Flush
// gives exactly Decode of all the ids.
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	t       *Tokenizer
	pending []byte // the start of an incomplete character, at most 3 bytes
	started bool   // some text has been returned (stripFirst applies before)
}

// NewDecoder returns a streaming Decoder.
func (t *Tokenizer) NewDecoder() *Decoder {
	return &Decoder{t: t}
}

// Next adds one token and returns the text it completes, possibly "". Bytes
// that can never become a valid character are returned as they are, not held
// back. An id no token has decodes to "" (as in Hugging Face tokenizers; a
// model's embedding may have more rows than the tokenizer has tokens).
func (d *Decoder) Next(id int) string {
	if d.started || d.t.sp == nil {
		return d.next(id)
	}
	out := d.next(id)
	if out == "" {
		return ""
	}
	d.started = true
	return d.t.stripFirst(out)
}

func (d *Decoder) next(id int) string {
	if !d.t.valid(id) {
		return ""
	}
	tok := d.t.tokens[id]
	if len(d.pending) == 0 {
		cut := completePrefix(tok)
		d.pending = append(d.pending, tok[cut:]...)
		return tok[:cut]
	}
	buf := append(d.pending, tok...)
	cut := completePrefix(string(buf)) // converts once; short in practice
	out := string(buf[:cut])
	d.pending = append(d.pending[:0], buf[cut:]...)
	return out
}

// Flush returns the bytes held back (the start of a character the stream
// never completed) and resets the Decoder.
func (d *Decoder) Flush() string {
	s := string(d.pending)
	if !d.started {
		s = d.t.stripFirst(s)
	}
	d.Reset()
	return s
}

// Reset drops any bytes held back, to decode a new stream.
func (d *Decoder) Reset() {
	d.pending = d.pending[:0]
	d.started = false
}

// completePrefix returns the length of s without a trailing incomplete
// character: the start (at most 3 bytes) of a multi-byte UTF-8 sequence that
// more bytes could still complete.
func completePrefix(s string) int {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax+1; i-- {
		if s[i]&0xC0 == 0x80 {
			continue // continuation byte: look further left for the lead
		}
		if !utf8.FullRuneInString(s[i:]) {
			return i
		}
		break
	}
	return len(s)
}
