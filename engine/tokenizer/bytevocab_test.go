package tokenizer

import (
	"testing"
)

// Ensure the byte vocabulary loads, maps each byte to its own id, keeps
// special tokens whole and round-trips arbitrary text.
func TestByteVocabJSON(t *testing.T) {
	data, err := ByteVocabJSON([]string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.VocabSize(); got != 259 {
		t.Fatalf("VocabSize = %d; want 259", got)
	}
	ids := tok.Encode("<|im_start|>hé 1\n<|im_end|>")
	want := []int{257, 'h', 0xc3, 0xa9, ' ', '1', '\n', 258}
	if len(ids) != len(want) {
		t.Fatalf("got %v; want %v", ids, want)
	}
	for i := range ids {
		if ids[i] != want[i] {
			t.Fatalf("got %v; want %v", ids, want)
		}
	}
	for _, s := range []string{"", "plain ascii", "emoji 👍🏽 and 中文", "tabs\t\tand\r\nnewlines"} {
		got, err := tok.Decode(tok.Encode(s))
		if err != nil || got != s {
			t.Fatalf("round trip %q: got %q, %v", s, got, err)
		}
	}
	if _, err := ByteVocabJSON([]string{"a", "a"}); err == nil {
		t.Fatal("repeated special token: got nil error")
	}
}
