package tokenizer

import "unicode/utf8"

// The byte-level alphabet of GPT-2 (bytes_to_unicode in its encoder.py): every
// byte is shown as one printable character so that vocabularies and merges
// can be stored as text. Printable bytes 0x21–0x7E, 0xA1–0xAC and 0xAE–0xFF
// stand for themselves; the other 68 bytes (controls, space, 0x7F–0xA0, 0xAD)
// become U+0100, U+0101, ... in byte order. So a space is "Ġ" (U+0120) and a
// newline "Ċ" (U+010A).
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	next := rune(0x100)
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// fromByteLevel turns a vocabulary string such as "Ġhello" into the raw bytes
// it stands for (" hello"). ok is false when s holds a character outside the
// byte-level alphabet.
func fromByteLevel(s string) (raw string, ok bool) {
	buf := make([]byte, 0, len(s))
	for _, r := range s {
		b, found := runeToByte[r]
		if !found {
			return "", false
		}
		buf = append(buf, b)
	}
	return string(buf), true
}

// toByteLevel is the inverse of fromByteLevel.
func toByteLevel(raw string) string {
	buf := make([]byte, 0, 2*len(raw))
	for i := 0; i < len(raw); i++ {
		buf = utf8.AppendRune(buf, byteToRune[raw[i]])
	}
	return string(buf)
}
