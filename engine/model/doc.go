// Package model loads Hugging Face decoder-only transformers (the Llama,
// Qwen2, Qwen3, Qwen3-MoE, Mistral and Gemma 3 text families, each described
// in family.go; the mixture of experts in moe.go) and runs their forward and
// backward passes in fp32 on the CPU.
//
// The code follows llm.c: each layer is a plain function over []float32
// buffers with its shapes in the doc comment, outputs first, then inputs,
// then weights, then sizes. Dimension letters used throughout:
//
//	T   tokens in the current chunk (all sequences of a batch, concatenated)
//	C   hidden size (channels)
//	NH  query heads, KVH key/value heads, HD head dimension
//	Q   NH*HD, KV KVH*HD
//	F   MLP intermediate size (Fm: one expert's)
//	E   experts of a mixture-of-experts layer, k of them chosen per row
//	V   vocabulary size
//	L   number of layers
//
// Weights stay in their checkpoint dtype (f32, bf16 or f16) inside
// kernels.Mat, or are quantized at load (LoadOptions.Quantize: blockwise
// 8- or 4-bit), and are widened inside the matmul kernels; norms and biases are
// widened to fp32 at load time.
package model
