// Package gguf writes and reads GGUF v3 files, the single-file model format of
// ggml and llama.cpp, and exports engine models to it.
//
// Export turns a model.Model plus its Hugging Face tokenizer files
// (tokenizer.json, tokenizer_config.json) into a GGUF that llama.cpp loads and
// runs with the same numerics as the engine: the Llama, Mistral, Qwen2, Qwen3
// and Gemma 3 families (arch.go says how each is laid out and what llama.cpp
// cannot represent), matrices in F32, F16 or Q8_0, norms and biases in F32,
// the vocabulary (byte-level BPE with its merges, or SentencePiece with
// scores), special tokens and chat template. The file is
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
//   - Qwen2, Qwen3, Gemma 3: llama.cpp's "qwen2", "qwen3" and "gemma3"
//     architectures already use the NeoX (rotate_half) rotation, so their
//     weights are written as they are. Mistral is written as "llama", as
//     llama.cpp's converter does.
//   - Gemma 3: llama.cpp wants its norm weights with the +1 already added,
//     which is how the engine holds them (model.Family.NormPlusOne).
//   - Qwen3-MoE: llama.cpp's "qwen3moe" stacks each layer's experts into
//     3-D tensors (ffn_gate_exps, ffn_up_exps, ffn_down_exps, expert-major)
//     and reads the router as ffn_gate_inp, written in F32 as the engine
//     keeps it unquantized.
package gguf
