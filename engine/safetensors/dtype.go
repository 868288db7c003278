package safetensors

import "strconv"

// DType is the element type of a tensor. The zero value is not a valid
// dtype.
//
// The constants are declared in the reference implementation's order, which
// is also the (reversed) order in which [Write] lays tensors out.
type DType uint8

// The dtypes a file may hold. Only F64, F32, F16 and BF16 convert to
// float32 ([File.ReadF32]); every dtype can be read raw.
const (
	Bool       DType = iota + 1 // BOOL: one byte, 0 or 1
	U8                          // U8
	I8                          // I8
	F8E5M2                      // F8_E5M2
	F8E4M3                      // F8_E4M3
	F8E8M0                      // F8_E8M0
	F8E4M3FNUZ                  // F8_E4M3FNUZ
	F8E5M2FNUZ                  // F8_E5M2FNUZ
	I16                         // I16
	U16                         // U16
	F16                         // F16: IEEE 754 half precision
	BF16                        // BF16: bfloat16, the top half of a float32
	I32                         // I32
	U32                         // U32
	F32                         // F32
	C64                         // C64: complex, two float32 parts
	F64                         // F64
	I64                         // I64
	U64                         // U64
	numDTypes
)

var dtypeNames = [numDTypes]string{
	Bool: "BOOL", U8: "U8", I8: "I8",
	F8E5M2: "F8_E5M2", F8E4M3: "F8_E4M3", F8E8M0: "F8_E8M0",
	F8E4M3FNUZ: "F8_E4M3FNUZ", F8E5M2FNUZ: "F8_E5M2FNUZ",
	I16: "I16", U16: "U16", F16: "F16", BF16: "BF16",
	I32: "I32", U32: "U32", F32: "F32",
	C64: "C64", F64: "F64", I64: "I64", U64: "U64",
}

var dtypeSizes = [numDTypes]int{
	Bool: 1, U8: 1, I8: 1,
	F8E5M2: 1, F8E4M3: 1, F8E8M0: 1, F8E4M3FNUZ: 1, F8E5M2FNUZ: 1,
	I16: 2, U16: 2, F16: 2, BF16: 2,
	I32: 4, U32: 4, F32: 4,
	C64: 8, F64: 8, I64: 8, U64: 8,
}

// String returns the dtype's name as the header spells it ("BF16",
// "F8_E4M3"), or "DType(n)" for an invalid value.
func (d DType) String() string {
	if d.valid() {
		return dtypeNames[d]
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

// Size returns the size of one element in bytes, or 0 for an invalid dtype.
func (d DType) Size() int {
	if d.valid() {
		return dtypeSizes[d]
	}
	return 0
}

func (d DType) valid() bool { return d > 0 && d < numDTypes }

// parseDType returns the dtype the header calls s.
func parseDType(s string) (DType, bool) {
	for d := Bool; d < numDTypes; d++ {
		if dtypeNames[d] == s {
			return d, true
		}
	}
	return 0, false
}
