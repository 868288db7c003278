package safetensors

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// fuzzSeeds returns valid files of every dtype and layout feature, files as
// other writers lay them out, and every malformed file of the bad-file table.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	var all []Tensor
	for i, d := range allDTypes() {
		all = append(all, Tensor{Name: "t" + d.String(), DType: d, Shape: []int{2, 1}, Data: randBytes(uint64(i), 2*d.Size())})
	}
	seeds = append(seeds,
		mustWrite(tb, all, map[string]string{"format": "pt"}),
		mustWrite(tb, []Tensor{FromF32("w", BF16, []int{3}, []float32{1, 2, 3}), FromF32("s", F64, nil, []float32{1})}, nil),
		mustWrite(tb, []Tensor{{Name: "e", DType: F32, Shape: []int{0, 5}}}, nil),
		mustWrite(tb, nil, nil),
		build(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[4,8]}, "b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 8)),
	)
	for _, bf := range badFiles() {
		seeds = append(seeds, bf.file)
	}
	return seeds
}

// FuzzOpen feeds arbitrary bytes to the reader. It must never panic; on
// success every tensor must read back within the input's size and survive a
// write and re-read unchanged; on failure the error must be a one-line
// ErrFormat *Error.
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := openBytes(data, "fuzz")
		if err != nil {
			var e *Error
			msg := err.Error()
			if !errors.As(err, &e) || !errors.Is(err, ErrFormat) || !strings.HasPrefix(msg, "safetensors: fuzz: ") ||
				strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("bad error %T %q", err, msg)
			}
			return
		}
		var total int64
		var tensors []Tensor
		for _, name := range sf.Names() {
			info, ok := sf.Info(name)
			if !ok || info.Name != name {
				t.Fatalf("Info(%q) = %+v, %v", name, info, ok)
			}
			total += info.Size
			if total > int64(len(data)) {
				t.Fatalf("tensors claim %d bytes of a %d-byte input", total, len(data))
			}
			raw, err := sf.ReadRaw(name)
			if err != nil || int64(len(raw)) != info.Size || info.Size != int64(info.NumElements()*info.DType.Size()) {
				t.Fatalf("ReadRaw(%q): %d bytes, %v; info %+v", name, len(raw), err, info)
			}
			switch info.DType {
			case F32, F16, BF16, F64:
				v, err := sf.ReadF32(name)
				if err != nil || len(v) != info.NumElements() {
					t.Fatalf("ReadF32(%q): %d values, %v", name, len(v), err)
				}
			}
			if info.DType.Size() == 2 {
				if v, err := sf.ReadU16(name); err != nil || len(v) != info.NumElements() {
					t.Fatalf("ReadU16(%q): %d values, %v", name, len(v), err)
				}
			}
			tensors = append(tensors, Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
		}

		// Round trip: what we read, we can write, and read back the same.
		var buf bytes.Buffer
		if err := Write(&buf, tensors, sf.Metadata()); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		again, err := openBytes(buf.Bytes(), "again")
		if err != nil {
			t.Fatalf("reopen rewritten file: %v", err)
		}
		if !slices.Equal(again.Names(), sf.Names()) || !maps.Equal(again.Metadata(), sf.Metadata()) {
			t.Fatal("rewritten file has other names or metadata")
		}
		for _, tn := range tensors {
			info, _ := again.Info(tn.Name)
			raw, err := again.ReadRaw(tn.Name)
			if err != nil || info.DType != tn.DType || !slices.Equal(info.Shape, tn.Shape) || !bytes.Equal(raw, tn.encoded()) {
				t.Fatalf("tensor %q changed in the round trip", tn.Name)
			}
		}
	})
}
