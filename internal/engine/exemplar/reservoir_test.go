package exemplar

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// spanStream makes n exemplars with values drawn from few distinct ones (so that there are ties)
// and distinct random priorities; each exemplar's trace id holds its index.
func spanStream(rng *rand.Rand, n int) []Exemplar {
	seen := map[uint64]bool{}
	out := make([]Exemplar, n)
	for i := range out {
		p := rng.Uint64()
		for seen[p] {
			p = rng.Uint64()
		}
		seen[p] = true
		out[i] = Exemplar{Value: float64(rng.IntN(8)), Time: int64(i), Priority: p}
		out[i].TraceID[0], out[i].TraceID[1] = byte(i), byte(i>>8)
	}
	return out
}

func index(e Exemplar) int { return int(e.TraceID[0]) | int(e.TraceID[1])<<8 }

// reference is what a reservoir of size offered stream must hold, worked out by sorting: the index of
// the first of the greatest values, and the indexes of the size-1 lowest priorities of the others.
func reference(stream []Exemplar, size int) (maxAt int, sample []int) {
	if len(stream) == 0 {
		return -1, nil
	}
	for i, e := range stream {
		if e.Value > stream[maxAt].Value {
			maxAt = i
		}
	}
	var others []int
	for i := range stream {
		if i != maxAt {
			others = append(others, i)
		}
	}
	slices.SortFunc(others, func(a, b int) int {
		if stream[a].Priority < stream[b].Priority {
			return -1
		}
		return 1
	})
	others = others[:min(len(others), size-1)]
	slices.Sort(others)
	return maxAt, others
}

// held is what r holds, in the terms of reference.
func held(r *Reservoir) (maxAt int, sample []int) {
	m, ok := r.Max()
	if !ok {
		return -1, nil
	}
	for _, e := range r.AppendTo(nil)[1:] { // the greatest first
		sample = append(sample, index(e))
	}
	slices.Sort(sample)
	return index(m), sample
}

func TestReservoirKeepsTheGreatestAndALowestPrioritySample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		size := 1 + rng.IntN(6)
		stream := spanStream(rng, rng.IntN(40))
		r := New(size)
		for _, e := range stream {
			r.Offer(e)
		}
		wantMax, wantSample := reference(stream, size)
		gotMax, gotSample := held(r)
		if gotMax != wantMax || !slices.Equal(gotSample, wantSample) {
			t.Fatalf("trial %d (size %d, %d spans): holds greatest %d and %v, want %d and %v", trial, size, len(stream), gotMax, gotSample, wantMax, wantSample)
		}
		if r.Len() > size {
			t.Fatalf("trial %d: %d exemplars held, size %d", trial, r.Len(), size)
		}
	}
}

// Merging the reservoirs of consecutive parts of a stream, in order, holds what one reservoir offered
// the whole stream holds: the panes of a window, or the slides of a cumulative point, merge exactly.
func TestMergeOfPartsIsTheReservoirOfTheWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		size := 1 + rng.IntN(6)
		stream := spanStream(rng, rng.IntN(60))
		merged := New(size)
		for lo := 0; lo < len(stream); {
			hi := min(len(stream), lo+1+rng.IntN(12))
			part := New(size)
			for _, e := range stream[lo:hi] {
				part.Offer(e)
			}
			merged.Merge(part)
			if rng.IntN(4) == 0 {
				merged.Merge(New(size)) // a pane without spans
			}
			lo = hi
		}
		wantMax, wantSample := reference(stream, size)
		gotMax, gotSample := held(merged)
		if gotMax != wantMax || !slices.Equal(gotSample, wantSample) {
			t.Fatalf("trial %d (size %d, %d spans): merged holds %d and %v, want %d and %v", trial, size, len(stream), gotMax, gotSample, wantMax, wantSample)
		}
	}
}

// The sample is uniform: of 50 spans whose last has the greatest value, each of the other 49 is in the
// sample of 4 (size 5) with probability 4/49, whether the spans went into one reservoir or into five
// merged. With a fixed seed, the inclusion counts of 20,000 trials must pass a chi-square bound that a
// sampler favouring early or late spans fails by far.
func TestSampleIsUniform(t *testing.T) {
	const (
		spans, size, trials = 50, 5, 20000
	)
	for _, parts := range []int{1, 5} {
		rng := rand.New(rand.NewPCG(5, uint64(parts)))
		counts := make([]int, spans)
		for range trials {
			merged := New(size)
			for p := range parts {
				part := New(size)
				for i := p * spans / parts; i < (p+1)*spans/parts; i++ {
					e := Exemplar{Value: float64(i), Priority: rng.Uint64()}
					e.TraceID[0] = byte(i)
					part.Offer(e)
				}
				merged.Merge(part)
			}
			if m, _ := merged.Max(); index(m) != spans-1 {
				t.Fatalf("greatest held %d, want %d", index(m), spans-1)
			}
			for _, e := range merged.AppendTo(nil) {
				counts[index(e)]++
			}
		}
		if counts[spans-1] != trials {
			t.Fatalf("the greatest was held %d times of %d", counts[spans-1], trials)
		}
		expected := float64(trials) * (size - 1) / (spans - 1)
		chi2 := 0.0
		for _, c := range counts[:spans-1] {
			chi2 += (float64(c) - expected) * (float64(c) - expected) / expected
		}
		// 48 degrees of freedom: mean 48, standard deviation sqrt(96) ≈ 9.8; the bound is 5 of them
		// above the mean (sampling without replacement only lowers the statistic).
		if bound := 48 + 5*math.Sqrt(96); chi2 > bound {
			t.Errorf("parts=%d: chi-square %.1f over %.1f; inclusion counts %v (expected %.0f each)", parts, chi2, bound, counts[:spans-1], expected)
		}
		t.Logf("parts=%d: chi-square %.1f (48 degrees of freedom)", parts, chi2)
	}
}

func TestEncodingRoundTripsAndRefusesDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	r := New(4)
	for i, e := range spanStream(rng, 30) {
		e.Value, e.SpanID[7] = float64(i), 9 // distinct values: the last is the greatest
		r.Offer(e)
	}
	b := r.AppendBinary([]byte("x"))[1:]
	got := New(4)
	rest, err := got.Decode(append(b, 'y'))
	if err != nil || string(rest) != "y" {
		t.Fatalf("Decode = %q, %v", rest, err)
	}
	want, have := r.AppendTo(nil), got.AppendTo(nil)
	if !slices.Equal(want, have) {
		t.Fatalf("decoded %+v, want %+v", have, want)
	}
	for _, e := range spanStream(rng, 30) { // a restored reservoir goes on as the one saved
		e.Value = -1
		r.Offer(e)
		got.Offer(e)
	}
	m1, s1 := held(r)
	if m2, s2 := held(got); m1 != m2 || !slices.Equal(s1, s2) {
		t.Fatalf("after more spans, the restored reservoir holds %d and %v, the saved one %d and %v", m2, s2, m1, s1)
	}
	for cut := range len(b) {
		if _, err := New(4).Decode(b[:cut]); err == nil {
			t.Fatalf("a checkpoint cut to %d of %d bytes decoded", cut, len(b))
		}
	}
	if _, err := New(3).Decode(b); err == nil {
		t.Error("4 exemplars decoded into a reservoir of 3")
	}
	swapped := slices.Clone(b)
	copy(swapped[1+24:1+32], b[1+exemplarBytes+24:1+exemplarBytes+32]) // the greatest's value from the next one
	copy(swapped[1+exemplarBytes+24:1+exemplarBytes+32], b[1+24:1+32])
	if _, err := New(4).Decode(swapped); err == nil {
		t.Error("a sample exemplar greater than the greatest decoded")
	}
	empty := New(2).AppendBinary(nil)
	if rest, err := got.Decode(empty); err != nil || len(rest) != 0 || got.Len() != 0 {
		t.Errorf("an empty reservoir decodes as %d exemplars, %v", got.Len(), err)
	}
	nan := slices.Clone(b)
	binary.LittleEndian.PutUint64(nan[1+exemplarBytes+24:], math.Float64bits(math.NaN()))
	if _, err := New(4).Decode(nan); err == nil {
		t.Error("an exemplar whose value is NaN decoded")
	}
	// A reservoir of one (the greatest alone) and the zero Reservoir round-trip too, and go on taking
	// a greater span.
	for _, one := range []*Reservoir{New(1), {}} {
		one.Offer(Exemplar{Value: 5, Priority: 1})
		back := New(1)
		if _, err := back.Decode(one.AppendBinary(nil)); err != nil || back.Len() != 1 {
			t.Fatalf("a reservoir of one decodes as %d exemplars, %v", back.Len(), err)
		}
		back.Offer(Exemplar{Value: 7, Priority: 2})
		back.Offer(Exemplar{Value: 6, Priority: 0})
		if m, _ := back.Max(); back.Len() != 1 || m.Value != 7 {
			t.Errorf("a restored reservoir of one holds %d, greatest %v; want 1, 7", back.Len(), m.Value)
		}
	}
	// AppendList writes a point's exemplars, in any order, as AppendBinary does their reservoir.
	list := New(4)
	if _, err := list.Decode(AppendList(nil, slices.Concat(have[1:], have[:1]))); err != nil {
		t.Fatal(err)
	}
	orig := New(4)
	if _, err := orig.Decode(b); err != nil {
		t.Fatal(err)
	}
	m1, s1 = held(list)
	if m2, s2 := held(orig); m1 != m2 || !slices.Equal(s1, s2) {
		t.Errorf("AppendList of the exemplars decodes as %d and %v, want %d and %v", m1, s1, m2, s2)
	}
}

// A span offered twice (an upstream retry sends a batch again) is held once, as the greatest or in
// the sample.
func TestTheSameSpanIsHeldOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	spans := spanStream(rng, 6)
	for i := range spans {
		spans[i].TraceID[0], spans[i].Priority = byte(i+1), rng.Uint64()
	}
	r := New(10)
	for range 2 {
		for _, e := range spans {
			r.Offer(e)
		}
	}
	if r.Len() != len(spans) {
		t.Errorf("%d spans offered twice each: %d held, want %d", len(spans), r.Len(), len(spans))
	}
}

// BenchmarkOffer: one span into a reservoir of 5 that has seen many, the common case in a busy pane.
func BenchmarkOffer(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	stream := make([]Exemplar, 1024)
	for i := range stream {
		stream[i] = Exemplar{Value: rng.Float64() * 100, Priority: rng.Uint64()}
	}
	r := New(5)
	b.ReportAllocs()
	for i := range b.N {
		r.Offer(stream[i&1023])
	}
}
