//go:build !unix

package bench

// evictBuffer returns n bytes; here on the Go heap.
func evictBuffer(n int) []byte { return make([]byte, n) }
