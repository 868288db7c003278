//go:build !linux

package kernels

// l2Bytes is unknown off Linux: blockPanelsFor then keeps the default.
func l2Bytes() int { return 0 }
