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
	items := make([]Item, batch)
	out := make([]Claim, batch)
	var order []int32
	t := int64(1e18)
	for done := 0; done < n; done += batch {
		for i := range items {
			items[i] = Item{ID: Fold(uint64(done+i+1) * 0x9e3779b97f4a7c15), Time: t, Expiry: expiryMinute(t)}
			t += step
		}
		order = s.Claims(items, t-batch*step, out, order)
	}
	return t, s
}

func expiryMinute(t int64) int64 {
	const minute = int64(time.Minute)
	return (t/minute+1)*minute + 30*int64(time.Second)
}

// bytesPerIdentity is the heap a set holding n identities takes, per identity.
func bytesPerIdentity(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, s := steady(New(n, SliceWidth(int64(time.Minute))), n, 50_000)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkClaims is the cost of a new identity claimed in batches of 1000 at 50,000 records a
// second of event time (one-minute windows, 30 s of lateness, W a batch behind), in a set that holds
// n identities already; W moves on and expired slices are forgotten once a second of event time, as
// the component's emit ticker does, so that at 5,000,000 the set holds the 4.5 million identities
// of a minute and a half.
func BenchmarkClaims(b *testing.B) {
	for _, n := range []int{10_000, 5_000_000} {
		b.Run(itoa(n), func(b *testing.B) {
			s := New(n+1000, SliceWidth(int64(time.Minute)))
			t, _ := steady(s, n, 50_000)
			const batch = 1000
			step := int64(time.Second) / 50_000
			items := make([]Item, batch)
			out := make([]Claim, batch)
			var order []int32
			b.ReportAllocs()
			b.ResetTimer()
			for k := range b.N {
				for i := range items {
					items[i] = Item{ID: Fold(uint64(n+k*batch+i+1) * 0x9e3779b97f4a7c15), Time: t, Expiry: expiryMinute(t)}
					t += step
				}
				w := t - batch*step
				order = s.Claims(items, w, out, order)
				if k%50 == 0 {
					s.Forget(w)
				}
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
	s := New(n+b.N*50_000+50_000, SliceWidth(int64(time.Minute)))
	t, _ := steady(s, n, 50_000)
	save(s, memParts{}, 0)
	var mark, parts time.Duration
	var bytes int
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		items := make([]Item, 50_000)
		for i := range items {
			items[i] = Item{ID: Fold(uint64(t)), Time: t, Expiry: expiryMinute(t)}
			t += int64(time.Second) / 50_000
		}
		s.Claims(items, 0, make([]Claim, len(items)), nil)
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
