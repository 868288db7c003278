// Package gguf writes and reads GGUF v3 files, the single-file model format of
// ggml and llama.cpp, and exports engine models to it.
//
// Export turns a model.Model plus its Hugging Face tokenizer files
// (tokenizer.json, tokenizer_config.json) into a GGUF that llama.cpp loads and
// runs with the same numerics as the engine: the Llama and Qwen2 families,
// matrices in F32 or F16, norms and biases in F32, the byte-level BPE
// vocabulary with its merges, special tokens and chat template. The file is
// streamed tensor by tensor, so exporting never holds a second copy of the
// weights.
//
// Write is the format-level encoder Export is built on (metadata key-value
// pairs plus tensors whose data is produced on demand), and Read/Open decode a
// file's header, metadata and tensor table, for tests and tools that check
// what was written.
//
// The layout follows ggml's docs/gguf.md: a header (magic "GGUF", version 3,
// tensor and metadata counts), the metadata key-value pairs, the tensor infos
// (name, dims with ne0 the fastest-varying dimension, type, offset), padding to
// general.alignment, then the tensor data, each tensor aligned. Everything is
// little-endian.
//
// Where the engine and llama.cpp differ in convention, Export converts:
//
//   - Llama: llama.cpp's "llama" architecture rotates consecutive pairs of a
//     head (2i, 2i+1), while Hugging Face checkpoints rotate i with i+HD/2
//     (rotate_half). Export reorders the rows of q_proj and k_proj (and their
//     biases) inside each head so that row 2i is HF row i and row 2i+1 is HF
//     row i+HD/2; both conventions then compute the same scores, because
//     q·k is unchanged when q and k are permuted alike. Llama 3 rope scaling
//     is written as the rope_freqs tensor, the per-frequency divisors
//     llama.cpp applies to its base frequencies.
//   - Qwen2: llama.cpp's "qwen2" architecture already uses the NeoX
//     (rotate_half) rotation, so its weights are written as they are.
package gguf
