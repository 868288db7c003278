// Package safetensors reads and writes the safetensors tensor file format,
// and Hugging Face model folders whose weights are sharded across several
// such files.
//
// # Format
//
// A safetensors file is
//
//	8 bytes   N, the header length, unsigned little-endian
//	N bytes   a JSON object: tensor name → {"dtype", "shape", "data_offsets"},
//	          plus an optional "__metadata__" object of string → string
//	the rest  the data section; each tensor's data_offsets [begin, end) are
//	          byte offsets into it
//
// Tensor data is row-major and little-endian. A shape of [] is a scalar.
//
// # Reading
//
// [Open] opens one file and [OpenDir] a model folder holding either
// model.safetensors or model.safetensors.index.json plus the shards its
// weight_map names. Both give the same accessors: Names, Info, Metadata,
// ReadRaw, ReadInto, ReadF32, ReadF32Into and ReadU16. Data is read with
// ReadAt on demand; nothing is mapped or cached, so reading a 500 MB model
// costs the memory of the tensors asked for and no more. [NewFile] reads
// from any [io.ReaderAt], such as a [bytes.Reader].
//
// Open checks the whole header before it returns, so that a later read can
// fail only on I/O. It follows the reference implementation
// (huggingface/safetensors) and rejects:
//
//   - a file shorter than 8 bytes, a header length past the end of the file
//     or above 100,000,000 bytes (checked before anything is allocated);
//   - a header that is not UTF-8, not one JSON object, or followed by
//     anything but whitespace;
//   - a tensor entry with a missing or ill-typed field, an unknown dtype, a
//     negative, fractional or overflowing dimension or offset, or a shape
//     whose element count times the dtype size overflows or differs from
//     end − begin;
//   - data_offsets with begin > end, or reaching past the data section
//     (a truncated file);
//   - tensors that overlap, leave a gap, or do not cover the data section
//     exactly up to its end: like the reference, the tensors sorted by
//     offset must tile the data section;
//   - a name given twice, an empty name, and a non-string metadata value.
//
// Sub-byte dtypes (F4, F6_E2M3, F6_E3M2) are not supported and are reported
// as unknown.
//
// # Writing
//
// [Write] and [WriteFile] lay tensors out as the reference writer does: by
// dtype, widest first (the reference's dtype order), then by name; the JSON
// header is compact, holds "__metadata__" first with its keys sorted, and is
// padded with spaces to a multiple of 8 bytes, so every tensor starts
// aligned to its element size. The output depends only on the set of
// tensors, not on their order, and for at most one metadata key it is byte
// for byte what the reference writes. [WriteFile] replaces the file
// atomically. [WriteSharded] writes a Hugging Face sharded folder.
//
// # Errors
//
// Every error is an [*Error] naming the file or folder and, when one is
// concerned, the tensor, in one line:
//
//	safetensors: model.safetensors: tensor "lm_head.weight": data_offsets [0, 100] but shape [10,10] of F32 needs 400 bytes
//
// Malformed input matches [ErrFormat] under [errors.Is], an unknown tensor
// name [ErrNotFound], and a read in an unsupported dtype [ErrDType]; I/O
// errors are wrapped as they come.
//
// # Concurrency
//
// A [File] or [Set] is safe for concurrent use by multiple goroutines.
package safetensors
