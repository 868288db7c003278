module github.com/artgo/art/engine/kernels/_asm

go 1.26.0
