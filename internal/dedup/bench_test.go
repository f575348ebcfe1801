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

// BenchmarkClaimPrefetched is claims in a full set of a million identities, copies and new ones
// at random (each new one past its maximum), each identity prefetched PrefetchAhead claims before
// its own (as ingest does), against claims alone.
func BenchmarkClaimPrefetched(b *testing.B) {
	const n = 1_000_000
	s := New(n, 1)
	for i := range n {
		s.Claim(idOf(uint64(i)), 1<<60, 0)
	}
	// pick is the i-th identity claimed: one of 2n at random, half of them in the set
	pick := func(i int) ID {
		x := uint64(i) * 0x9e3779b97f4a7c15
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		return idOf((x ^ x>>31) % (2 * n))
	}
	for _, ahead := range []bool{false, true} {
		b.Run("prefetch="+strconv.FormatBool(ahead), func(b *testing.B) {
			for i := range b.N {
				if ahead {
					next := [1]ID{pick(i + PrefetchAhead)}
					s.Prefetch(next[:])
				}
				s.Claim(pick(i), 1<<60, 0)
			}
		})
	}
}
