package stream

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// ExpiresAt is the watermark from which every window holding a record at t has expired: worked out
// here by listing those windows ([k·slide, k·slide + size) ∋ t) and taking the latest end plus the
// allowed lateness, on random geometries and times.
func TestExpiresAtIsTheLastWindowsEndPlusLateness(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 200 {
		slide := time.Duration(1+rng.IntN(20)) * time.Second
		size := slide * time.Duration(1+rng.IntN(6))
		lateness := time.Duration(rng.IntN(30)) * time.Second
		clk := clock.NewFake(time.Unix(1000, 0))
		e, err := New(Config{Size: size, Slide: slide, AllowedLateness: lateness, MaxFutureSkew: 1000 * time.Hour, Clock: clk,
			Aggregations: []Aggregation{{MaxSeries: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		b := e.Begin(clk.Now())
		for range 50 {
			ts := 1 + rng.Int64N(4000)*int64(time.Second)/4
			if b.Check(ts) != OnTime {
				t.Fatalf("t %d: not on time", ts)
			}
			var last int64
			found := false
			for k := floorDiv(ts-int64(size), int64(slide)); k*int64(slide) <= ts; k++ {
				if start := k * int64(slide); start <= ts && ts < start+int64(size) {
					last, found = start+int64(size), true
				}
			}
			if !found {
				t.Fatalf("no window holds %d", ts)
			}
			if got, want := b.ExpiresAt(ts), last+int64(lateness); got != want {
				t.Fatalf("size %v slide %v lateness %v: ExpiresAt(%d) = %d, want %d", size, slide, lateness, ts, got, want)
			}
		}
		b.End()
	}
}
