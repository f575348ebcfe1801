package dedup

import (
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkClaim is the cost of looking a new identity up and remembering it, in a set that holds
// n identities already (lifetime long enough that none expires).
func BenchmarkClaim(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			s := New(n+b.N+1, 1)
			for i := range n {
				s.Claim(idOf(uint64(i)), 1<<60, 0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if s.Claim(idOf(uint64(n+i)), 1<<60, 0) != Remembered {
					b.Fatal("a new identity was not remembered")
				}
			}
		})
	}
}

// BenchmarkBytesPerIdentity reports the heap a set holding n identities takes, per identity: the
// figure the memory formula multiplies max_ids by.
func BenchmarkBytesPerIdentity(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			var per float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s := New(n, 1)
				for i := range n {
					s.Claim(idOf(uint64(i)), 1<<60, 0)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				per = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(s)
			}
			b.ReportMetric(per, "B/identity")
		})
	}
}

func idOf(i uint64) ID { return ID{Hi: i * 0x9e3779b97f4a7c15, Lo: (i + 1) * 0xbf58476d1ce4e5b9} }

func itoa(n int) string { return "ids=" + strconv.Itoa(n) }

// BenchmarkAppendTo is the set's part of a checkpoint at a million identities: the time the ingest
// gate is held for it, and its bytes.
func BenchmarkAppendTo(b *testing.B) {
	s := New(1_000_000, 1)
	for i := range 1_000_000 {
		s.Claim(idOf(uint64(i)), 1<<60, 0)
	}
	var buf []byte
	b.ResetTimer()
	for range b.N {
		buf = s.AppendTo(buf[:0], 0)
	}
	b.ReportMetric(float64(len(buf)), "checkpoint_bytes")
}
