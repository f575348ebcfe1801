package dedup

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// steady claims n identities as records at rate per second of event time arrive, in batches of
// 1000, in order, with one-minute windows and 30 s of lateness (each slide of a minute expires at its
// end plus 90 s); W trails the records by a batch. It returns the set and the time after the last.
func steady(s *Set, n, rate int) (int64, *Set) {
	const batch = 1000
	step := int64(time.Second) / int64(rate)
	t := int64(1e18)
	for done := 0; done < n; done += batch {
		c := s.Claimer()
		w := t - batch*step
		for i := range batch {
			c.Claim(Item{ID: Fold(uint64(done+i+1) * 0x9e3779b97f4a7c15), Time: t, Expiry: expiryMinute(t)}, w)
			t += step
		}
		c.Done()
	}
	return t, s
}

func expiryMinute(t int64) int64 {
	const minute = int64(time.Minute)
	return (t/minute+1)*minute + 30*int64(time.Second)
}

// bytesPerIdentity is the heap a set holding n identities takes, per identity: n records in order
// at 50,000 a second of event time, none of which W has passed.
func bytesPerIdentity(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(n, SliceShift(int64(time.Minute)))
	c := s.Claimer()
	t := int64(1e18)
	for i := range n {
		c.Claim(Item{ID: Fold(uint64(i+1) * 0x9e3779b97f4a7c15), Time: t, Expiry: 1 << 62}, 0)
		t += int64(time.Second) / 50_000
	}
	c.Done()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if s.Len() != n {
		panic("identities not remembered")
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkClaims is the cost of a new identity claimed by the claimer of a batch of 1000, at 50,000
// records a second of event time (one-minute windows, 30 s of lateness, W just behind), in a set that
// holds n identities already; the slices W has passed are dropped as new ones come, so that from
// 4,500,000 on the set holds the identities of a minute and a half.
func BenchmarkClaims(b *testing.B) {
	for _, n := range []int{10_000, 4_500_000} {
		b.Run(itoa(n), func(b *testing.B) {
			s := New(max(n, 4_600_000), SliceShift(int64(time.Minute)))
			t, _ := steady(s, n, 50_000)
			const batch = 1000
			step := int64(time.Second) / 50_000
			b.ReportAllocs()
			b.ResetTimer()
			for k := range b.N {
				c := s.Claimer()
				w := t - step
				for i := range batch {
					if c.Claim(Item{ID: Fold(uint64(n+k*batch+i+1) * 0x9e3779b97f4a7c15), Time: t, Expiry: expiryMinute(t)}, w) != Remembered {
						b.Fatal("a new identity was not remembered")
					}
					t += step
				}
				c.Done()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/claim")
		})
	}
}

// BenchmarkBytesPerIdentity reports the heap a set holding n identities takes, per identity: the
// figure the memory formula multiplies max_ids by.
func BenchmarkBytesPerIdentity(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000, 5_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			var per float64
			for range b.N {
				per = bytesPerIdentity(n)
			}
			b.ReportMetric(per, "B/identity")
		})
	}
}

func itoa(n int) string { return "ids=" + strconv.Itoa(n) }

// BenchmarkCheckpoint is a checkpoint of a full set of five million identities (a minute and a half
// at 50,000 a second) taken a second of event time after the previous one: mark_ms is what the
// ingest gate is held for, parts_ms the encoding after it, and part_bytes what is written.
func BenchmarkCheckpoint(b *testing.B) {
	const n = 5_000_000
	s := New(n+b.N*50_000+50_000, SliceShift(int64(time.Minute)))
	t, _ := steady(s, n, 50_000)
	save(s, memParts{}, 0)
	var mark, parts time.Duration
	var bytes int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		c := s.Claimer()
		for range 50_000 {
			c.Claim(Item{ID: Fold(uint64(t)), Time: t, Expiry: expiryMinute(t)}, 0)
			t += int64(time.Second) / 50_000
		}
		c.Done()
		b.StartTimer()
		start := time.Now()
		m := s.Mark(0)
		mark += time.Since(start)
		start = time.Now()
		bytes = 0
		for _, p := range m.Parts() {
			bytes += len(p.Data)
		}
		m.Directory()
		parts += time.Since(start)
		m.Done(true)
	}
	b.ReportMetric(float64(mark.Microseconds())/1e3/float64(b.N), "mark_ms")
	b.ReportMetric(float64(parts.Microseconds())/1e3/float64(b.N), "parts_ms")
	b.ReportMetric(float64(bytes), "part_bytes")
}
