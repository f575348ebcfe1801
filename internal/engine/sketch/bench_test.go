package sketch

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkInsert inserts latency-like values (lognormal, median 50 ms,
// sigma 1, in ms) into a warm histogram and reports the memory of a
// histogram holding 1000 such values.
func BenchmarkInsert(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := latency(rng, 1<<12, 1)
	h := fill(New(DefaultScale, DefaultMaxBuckets), vals)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Insert(vals[i&(1<<12-1)])
	}
	b.StopTimer()
	m := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(3, 4)), 1000, 1))
	b.ReportMetric(float64(m.memoryBytes()), "bytes/histogram")
	b.ReportMetric(float64(len(m.appendPositiveCounts(nil))), "buckets/histogram")
	b.ReportMetric(float64(len(m.AppendBinary(nil))), "encoded-bytes/histogram")
}

// BenchmarkInsertPane measures a pane's life: Reset, then 1000 latency
// inserts (per-insert cost includes the reset and window placement).
func BenchmarkInsertPane(b *testing.B) {
	vals := latency(rand.New(rand.NewPCG(3, 4)), 1000, 1)
	h := fill(New(DefaultScale, DefaultMaxBuckets), vals)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.Reset()
		for _, v := range vals {
			h.Insert(v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/insert")
}

// mergeOperands returns two histograms of ~300 buckets each.
func mergeOperands() (*Histogram, *Histogram) {
	a := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(5, 6)), 1000, 0.5))
	c := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(7, 8)), 1000, 0.5))
	return a, c
}

// BenchmarkMerge merges a ~300-bucket histogram into an accumulating one
// (counters widen as the accumulator grows, like a long window).
func BenchmarkMerge(b *testing.B) {
	a, c := mergeOperands()
	dst := a.clone()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst.Merge(c)
	}
	b.ReportMetric(float64(len(c.appendPositiveCounts(nil))), "buckets")
}

// BenchmarkCopyMerge is CopyFrom of one ~300-bucket histogram then Merge of
// another, into a pooled target (the 1-byte counter fast path).
func BenchmarkCopyMerge(b *testing.B) {
	a, c := mergeOperands()
	dst := a.clone()
	dst.Merge(c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst.CopyFrom(a)
		dst.Merge(c)
	}
}

func BenchmarkQuantile(b *testing.B) {
	h := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(9, 10)), 1000, 1))
	qs := []float64{0.5, 0.9, 0.99, 0.999}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = h.Quantile(qs[i&3])
	}
}

func BenchmarkAppendBinary(b *testing.B) {
	h := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(9, 10)), 1000, 1))
	buf := h.AppendBinary(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf = h.AppendBinary(buf[:0])
	}
}

func BenchmarkUnmarshalBinary(b *testing.B) {
	h := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(9, 10)), 1000, 1))
	buf := h.AppendBinary(nil)
	var d Histogram
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := d.UnmarshalBinary(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSlide is about a sliding window's step at 1000 spans/s of event time for one series: a
// pane of 19 values (15 s) merged into a window of 75, the window exported at histogram_max_size 160,
// and a pane of 19 subtracted (the same one, so that the window stays as it was). Pane sketches this
// sparse are mostly zero counters.
func BenchmarkSlide(b *testing.B) {
	win := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(11, 12)), 75, 1))
	pane := fill(New(DefaultScale, DefaultMaxBuckets), latency(rand.New(rand.NewPCG(13, 14)), 19, 1))
	var counts []uint64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		win.Merge(pane)
		_, counts = win.AppendPositiveCountsAt(counts[:0], win.ScaleFor(160))
		if !win.Subtract(pane) {
			b.Fatal("subtract refused")
		}
	}
}
