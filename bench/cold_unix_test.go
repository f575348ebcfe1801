//go:build unix

package bench

import "syscall"

// evictBuffer returns n bytes outside the Go heap (an anonymous mapping), or on the heap if mapping
// fails.
func evictBuffer(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}
