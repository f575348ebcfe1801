//go:build unix

package bench

import "syscall"

// coldHuge is BENCH_COLD_HUGE=1: the eviction buffer asks for transparent huge pages, so that writing
// it evicts the caches but hardly the TLB (some 24 entries instead of 12288). Comparing the cold
// figures with and without tells whether the page translations of the component's state matter.
var coldHuge = envInt("BENCH_COLD_HUGE", 0) == 1

// evictBuffer returns n bytes outside the Go heap (an anonymous mapping), or on the heap if mapping
// fails.
func evictBuffer(n int) []byte {
	m := n
	if coldHuge {
		m += 2 << 20 // so that n bytes of whole, aligned huge pages fit
	}
	b, err := syscall.Mmap(-1, 0, m, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	if coldHuge {
		if err := adviseHugePages(b); err != nil {
			panic("BENCH_COLD_HUGE: madvise: " + err.Error())
		}
	}
	return b[:n]
}
