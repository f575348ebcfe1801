package stream

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestSeriesTableMatchesMap drives the table and a Go map with the same random inserts, finds and
// removes. The hashes come from a small set, so that probe runs are long, collide on the full hash,
// and wrap around the end of the slots: the cases backward-shift deletion must get right.
func TestSeriesTableMatchesMap(t *testing.T) {
	type id struct {
		agg int
		key string
	}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 3))
		hashes := make([]uint64, 1+rng.IntN(40))
		for i := range hashes {
			hashes[i] = rng.Uint64()
		}
		var tb seriesTable
		want := map[id]*series{}
		var held []*series
		for op := range 3000 {
			k := id{agg: rng.IntN(2), key: "k" + strconv.Itoa(rng.IntN(200))}
			h := hashes[rng.IntN(len(hashes))]
			if se := want[k]; se != nil {
				h = se.hash
			}
			switch rng.IntN(3) {
			case 0: // insert if absent
				if want[k] == nil {
					se := &series{key: k.key, agg: int32(k.agg), hash: h}
					tb.insert(se)
					want[k] = se
					held = append(held, se)
				}
			case 1: // remove a held series
				if len(held) == 0 {
					continue
				}
				i := rng.IntN(len(held))
				se := held[i]
				held[i] = held[len(held)-1]
				held = held[:len(held)-1]
				tb.remove(se)
				delete(want, id{int(se.agg), se.key})
			}
			if tb.n != len(want) {
				t.Fatalf("seed %d op %d: table holds %d, map %d", seed, op, tb.n, len(want))
			}
			// Every held series is found under its own hash, and an absent one is not.
			for _, se := range held {
				if got := tb.find(se.hash, int(se.agg), []byte(se.key)); got != se {
					t.Fatalf("seed %d op %d: find(%d, %q) = %p, want %p", seed, op, se.agg, se.key, got, se)
				}
			}
			if want[k] == nil {
				if got := tb.find(h, k.agg, []byte(k.key)); got != nil {
					t.Fatalf("seed %d op %d: found absent %v", seed, op, k)
				}
			}
		}
	}
}
