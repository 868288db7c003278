package safetensors

import (
	"encoding/binary"
	"strings"
	"testing"
)

// wF32 is a valid entry for tensor "w": F32 [2,2] at [0, 16].
const wF32 = `"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}`

// entry returns the header entry of tensor name.
func entryJSON(name, dtype, shape, offsets string) string {
	return `"` + name + `":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":` + offsets + `}`
}

type badFile struct {
	name   string
	file   []byte
	tensor string // the tensor the error must name, or ""
	want   string // a substring of the error
}

// badFiles lists malformed files, each with the error it must give. The
// fuzz test uses them as seeds too.
func badFiles() []badFile {
	lenPrefix := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	d16 := make([]byte, 16)
	return []badFile{
		// The header length.
		{"empty file", nil, "", "file is 0 bytes, too short"},
		{"shorter than the length", []byte{1, 2, 3}, "", "too short"},
		{"length past EOF", lenPrefix(1000, `{}`), "", "header length 1000 exceeds the 2 bytes that follow it"},
		{"length over the cap", lenPrefix(maxHeaderSize+1, `{}`), "", "exceeds the limit of 100000000 bytes"},
		{"length 2^64-1", lenPrefix(1<<64-1, `{}`), "", "exceeds the limit"},
		{"length zero", lenPrefix(0, `{}`), "", "header is empty"},

		// The JSON.
		{"not JSON", build(`{"w":`, nil), "", "invalid JSON header: unexpected end of JSON"},
		{"bad syntax", build(`{"w" 1}`, nil), "", "invalid JSON header: expected colon after object key (at byte 5)"},
		{"not an object", build(`[1,2]`, nil), "", "header is not a JSON object (not a safetensors file?)"},
		{"pickle", build("\x80\x02}q\x00", nil), "", "not valid UTF-8"},
		{"not UTF-8", build("{\"\xff\":{}}", nil), "", "header is not valid UTF-8"},
		{"two objects", build(`{} {}`, nil), "", "data after the JSON object"},
		{"trailing garbage", build(`{}x`, nil), "", "invalid JSON header: invalid character 'x'"},
		{"NUL padding", build("{}\x00\x00", nil), "", "invalid JSON header"},

		// One entry.
		{"entry not an object", build(`{"w":[1]}`, nil), "w", "header entry is not a JSON object"},
		{"missing dtype", build(`{"w":{"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", `missing "dtype"`},
		{"missing shape", build(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), "w", `missing "shape"`},
		{"missing offsets", build(`{"w":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)), "w", `missing "data_offsets"`},
		{"field twice", build(`{"w":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", `field "dtype" given twice`},
		{"dtype not a string", build(`{"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), "w", `"dtype" is 4, not a string`},
		{"unknown dtype", build(`{`+entryJSON("w", "F7", "[2,2]", "[0,16]")+`}`, d16), "w", `unknown dtype "F7"`},
		{"sub-byte dtype", build(`{`+entryJSON("w", "F4", "[2]", "[0,1]")+`}`, d16[:1]), "w", `unknown dtype "F4"`},
		{"lower-case dtype", build(`{`+entryJSON("w", "f32", "[1]", "[0,4]")+`}`, d16[:4]), "w", `unknown dtype "f32"`},
		{"shape not an array", build(`{`+entryJSON("w", "F32", `"2x2"`, "[0,16]")+`}`, d16), "w", `"shape" is "2x2", not an array of integers`},
		{"negative dim", build(`{`+entryJSON("w", "F32", "[-2,-2]", "[0,16]")+`}`, d16), "w", `"shape" holds -2, which is negative`},
		{"fractional dim", build(`{`+entryJSON("w", "F32", "[2.0,2]", "[0,16]")+`}`, d16), "w", `"shape" holds 2.0, not an integer`},
		{"exponent dim", build(`{`+entryJSON("w", "F32", "[4e0]", "[0,16]")+`}`, d16), "w", `"shape" holds 4e0, not an integer`},
		{"string dim", build(`{`+entryJSON("w", "F32", `["4"]`, "[0,16]")+`}`, d16), "w", `"shape" holds "4", not an integer`},
		{"dim overflows", build(`{`+entryJSON("w", "F32", "[99999999999999999999]", "[0,16]")+`}`, d16), "w", "which overflows"},
		{"product overflows", build(`{`+entryJSON("w", "F32", "[4294967296,4294967296,0]", "[0,0]")+`}`, nil), "w",
			"shape [4294967296,4294967296,0] has too many elements"},
		{"bytes overflow", build(`{`+entryJSON("w", "F64", "[4611686018427387904]", "[0,16]")+`}`, d16), "w",
			"shape [4611686018427387904] of F64 is too large"},
		{"one offset", build(`{`+entryJSON("w", "F32", "[2,2]", "[16]")+`}`, d16), "w", `"data_offsets" has 1 elements, want [begin, end]`},
		{"negative offset", build(`{`+entryJSON("w", "F32", "[2,2]", "[-16,0]")+`}`, d16), "w", `"data_offsets" holds -16, which is negative`},
		{"offsets not an array", build(`{`+entryJSON("w", "F32", "[2,2]", "null")+`}`, d16), "w", `"data_offsets" is null`},
		{"begin after end", build(`{`+entryJSON("w", "F32", "[2,2]", "[16,0]")+`}`, d16), "w", "data_offsets [16, 0]: begin is after end"},
		{"size mismatch", build(`{`+entryJSON("w", "F32", "[2,2]", "[0,12]")+`}`, d16[:12]), "w",
			"data_offsets [0, 12] but shape [2,2] of F32 needs 16 bytes"},
		{"truncated data", build(`{`+wF32+`}`, d16[:10]), "w",
			"data_offsets [0, 16] reach past the end of the data section (10 bytes; file truncated?)"},
		{"offsets past EOF", build(`{`+entryJSON("w", "U8", "[16]", "[1000000000000,1000000000016]")+`}`, d16), "w",
			"reach past the end of the data section (16 bytes"},

		// The layout.
		{"overlap", build(`{`+entryJSON("a", "F32", "[4]", "[0,16]")+`,`+entryJSON("b", "F32", "[4]", "[8,24]")+`}`, make([]byte, 24)), "b",
			`data_offsets [8, 24] overlap tensor "a" at [0, 16]`},
		{"same range twice", build(`{`+entryJSON("b", "F32", "[4]", "[0,16]")+`,`+entryJSON("a", "F32", "[4]", "[0,16]")+`}`, d16), "b",
			`data_offsets [0, 16] overlap tensor "a" at [0, 16]`},
		{"empty tensor inside another", build(`{`+wF32+`,`+entryJSON("e", "F32", "[0]", "[8,8]")+`}`, d16), "e",
			`data_offsets [8, 8] overlap tensor "w" at [0, 16]`},
		{"gap", build(`{`+entryJSON("a", "F32", "[2]", "[0,8]")+`,`+entryJSON("b", "F32", "[2]", "[16,24]")+`}`, make([]byte, 24)), "b",
			`data_offsets [16, 24] leave a gap of 8 bytes after tensor "a" at [0, 8]`},
		{"leading gap", build(`{`+entryJSON("w", "F32", "[2]", "[8,16]")+`}`, d16), "w",
			"data_offsets [8, 16] leave the first 8 bytes of the data section unused"},
		{"trailing bytes", build(`{`+wF32+`}`, make([]byte, 24)), "w",
			"last tensor ends at 16 but the data section holds 24 bytes (8 trailing bytes belong to no tensor)"},
		{"no tensors but data", build(`{}`, d16), "", "header lists no tensors but the data section holds 16 bytes"},

		// Names and metadata.
		{"name twice", build(`{`+wF32+`,`+wF32+`}`, d16), "w", "listed twice in the header"},
		{"empty name", build(`{`+entryJSON("", "F32", "[2,2]", "[0,16]")+`}`, d16), "", "header lists a tensor with an empty name"},
		{"metadata value not a string", build(`{"__metadata__":{"n":1},`+wF32+`}`, d16), "", `__metadata__ key "n" has value 1, not a string`},
		{"metadata not an object", build(`{"__metadata__":["pt"],`+wF32+`}`, d16), "", "__metadata__ is not a JSON object"},
		{"metadata twice", build(`{"__metadata__":{},"__metadata__":{}}`, nil), "", "__metadata__ given twice"},
		{"metadata key twice", build(`{"__metadata__":{"a":"1","a":"2"}}`, nil), "", `__metadata__ key "a" given twice`},
		{"multi-line value in message", build("{\"w\":{\"dtype\":[1,\n2],\"shape\":[1],\"data_offsets\":[0,1]}}", nil), "w",
			`"dtype" is [1, 2], not a string`},
	}
}

// Ensure each malformed file gives one-line error naming the file and,
// where one is at fault, the tensor.
func TestOpen_BadFiles(t *testing.T) {
	for _, tt := range badFiles() {
		t.Run(tt.name, func(t *testing.T) {
			f, err := openBytes(tt.file, "bad.safetensors")
			if err == nil {
				t.Fatalf("opened %q; want an error", tt.file)
			}
			if f != nil {
				t.Error("got a File with the error")
			}
			checkErr(t, err, ErrFormat, "bad.safetensors", tt.tensor, tt.want)
		})
	}
}

// Ensure the message has exactly the documented shape.
func TestOpen_BadFileMessage(t *testing.T) {
	const name = "model.layers.0.mlp.up_proj.weight"
	file := build(`{`+entryJSON(name, "F32", "[10,10]", "[0,100]")+`}`, make([]byte, 100))
	_, err := openBytes(file, "model.safetensors")
	want := `safetensors: model.safetensors: tensor "model.layers.0.mlp.up_proj.weight": data_offsets [0, 100] but shape [10,10] of F32 needs 400 bytes`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// Ensure long values are clipped in messages.
func TestOpen_LongValuesClipped(t *testing.T) {
	long := strings.Repeat("9", 5000)
	_, err := openBytes(build(`{`+entryJSON("w", "F32", "["+long+"]", "[0,4]")+`}`, make([]byte, 4)), "x")
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("got %d-byte error %v; want a short one", len(err.Error()), err)
	}
}
