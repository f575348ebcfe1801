package sketch

import (
	"math/rand/v2"
	"testing"
)

// usedRange against a byte-by-byte scan, on windows of every length up to 70 bytes with the non-zero
// bytes anywhere, at every counter width.
func TestUsedRangeMatchesByteScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 0; n <= 70; n++ {
		for trial := range 200 {
			d := make([]byte, n)
			for range rng.IntN(3) {
				if n > 0 {
					d[rng.IntN(n)] = byte(1 + rng.IntN(255))
				}
			}
			wlog := uint8(rng.IntN(4))
			b := buckets{data: d, wlog: wlog}
			first, last, ok := b.usedRange()
			wf, wl, wok := -1, -1, false
			for i, c := range d {
				if c != 0 {
					if !wok {
						wf = i
					}
					wl, wok = i, true
				}
			}
			if ok != wok || (ok && (first != wf>>wlog || last != wl>>wlog)) {
				t.Fatalf("n=%d trial %d wlog=%d %v: usedRange = %d, %d, %v; want %d, %d, %v",
					n, trial, wlog, d, first, last, ok, wf>>wlog, wl>>wlog, wok)
			}
		}
	}
}
