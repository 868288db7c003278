package safetensors

import "testing"

// Ensure every dtype's name parses back to it and sizes match the format.
func TestDType(t *testing.T) {
	sizes := map[string]int{
		"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1,
		"I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "C64": 8, "F64": 8, "I64": 8, "U64": 8,
	}
	if got := len(allDTypes()); got != len(sizes) {
		t.Fatalf("%d dtypes; want %d", got, len(sizes))
	}
	for _, d := range allDTypes() {
		name := d.String()
		if got, ok := parseDType(name); !ok || got != d {
			t.Errorf("parseDType(%q) = %v, %v; want %v", name, got, ok, d)
		}
		if d.Size() != sizes[name] {
			t.Errorf("%s.Size() = %d; want %d", name, d.Size(), sizes[name])
		}
	}
	for _, d := range []DType{0, numDTypes, 200} {
		if d.Size() != 0 || d.String() == "" || d.valid() {
			t.Errorf("invalid DType %d: Size %d, String %q", d, d.Size(), d.String())
		}
	}
	if got := DType(0).String(); got != "DType(0)" {
		t.Errorf("DType(0).String() = %q; want DType(0)", got)
	}
}
