//go:build !linux

package kernels

import "unsafe"

func adviseHugePages(p unsafe.Pointer, n int) {}

func adviseFresh(b []byte) {}
