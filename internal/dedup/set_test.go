package dedup

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// modelEntry is what the reference model knows of an identity: claimed Remembered at expiry, and not
// released since.
type modelEntry struct{ expiry int64 }

// TestClaimAgainstModel drives a set with random claims, releases, forgets and advances of W, over a
// small pool of identities, and checks each answer against a map of what was remembered: a
// duplicate only of an identity remembered and not yet expired (never a false positive), every such
// one a duplicate, an overflow only with the set full, and after a sweep of every shard exactly the
// live identities held.
func TestClaimAgainstModel(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		maxIDs := 1 + rng.IntN(40)
		const lifetime, step = 100, 10
		s := New(maxIDs, step)
		model := map[ID]modelEntry{}
		pool := make([]ID, 1+rng.IntN(120))
		for i := range pool {
			pool[i] = ID{rng.Uint64(), rng.Uint64()}
		}
		w := int64(rng.IntN(1000))
		live := func() int {
			n := 0
			for _, e := range model {
				if e.expiry > w {
					n++
				}
			}
			return n
		}
		for op := range 3000 {
			switch r := rng.IntN(100); {
			case r < 70:
				id := pool[rng.IntN(len(pool))]
				expiry := w - 20 + int64(rng.IntN(lifetime+20))
				e, known := model[id]
				was := known && e.expiry > w
				before := s.Len()
				if rng.IntN(4) == 0 { // a prefetch changes nothing
					from := rng.IntN(len(pool))
					s.Prefetch(pool[from:min(len(pool), from+PrefetchAhead)])
				}
				got := s.Claim(id, expiry, w)
				switch {
				case was && got != Duplicate:
					t.Fatalf("seed %d op %d: identity remembered until %d, W %d: got %v, want Duplicate", seed, op, e.expiry, w, got)
				case !was && got == Duplicate:
					t.Fatalf("seed %d op %d: identity not remembered (known %v, expiry %d), W %d: got Duplicate", seed, op, known, e.expiry, w)
				case !was && expiry <= w && got != Passed:
					t.Fatalf("seed %d op %d: a new identity W has passed: got %v, want Passed", seed, op, got)
				case got == Overflow && before < maxIDs && s.Len() < maxIDs:
					t.Fatalf("seed %d op %d: Overflow with %d of %d held", seed, op, s.Len(), maxIDs)
				}
				switch got {
				case Remembered:
					model[id] = modelEntry{expiry}
				case Passed, Overflow:
					delete(model, id)
				}
			case r < 80:
				id := pool[rng.IntN(len(pool))]
				if _, ok := model[id]; ok && rng.IntN(2) == 0 {
					s.Release(id)
					delete(model, id)
				}
			case r < 95:
				w += int64(rng.IntN(8))
			default:
				s.Forget(w)
			}
			if n := s.Len(); n > maxIDs || n < live() {
				t.Fatalf("seed %d op %d: %d held, at most %d, at least the %d live", seed, op, n, maxIDs, live())
			}
		}
		// A sweep of every shard leaves exactly the live identities.
		s.Forget(w + 1<<40)
		for id, e := range model {
			if e.expiry <= w+1<<40 {
				delete(model, id)
			}
		}
		if s.Len() != len(model) {
			t.Fatalf("seed %d: after a sweep of every shard, %d held, want %d", seed, s.Len(), len(model))
		}
	}
}

// TestOverflowNeverDropsANewRecord fills a set and checks that every identity past the maximum is an
// Overflow, never a Duplicate, and that once W passes the held ones' expiry a full set makes room.
func TestOverflowNeverDropsANewRecord(t *testing.T) {
	s := New(100, 10)
	for i := range uint64(100) {
		if got := s.Claim(ID{i, i}, 1000, 0); got != Remembered {
			t.Fatalf("identity %d of 100: %v", i, got)
		}
	}
	for i := uint64(100); i < 1000; i++ {
		if got := s.Claim(ID{i, i}, 1000, 0); got != Overflow {
			t.Fatalf("identity %d past the maximum of 100: %v, want Overflow", i, got)
		}
	}
	if got := s.Claim(ID{5, 5}, 1000, 0); got != Duplicate {
		t.Fatalf("a held identity with the set full: %v, want Duplicate", got)
	}
	// W reaches the held identities' expiry: the next claim sweeps its shard and is remembered.
	if got := s.Claim(ID{2000, 2000}, 2000, 1000); got != Remembered {
		t.Fatalf("a new identity once the held ones expired: %v, want Remembered", got)
	}
	if got := s.Claim(ID{5, 5}, 2000, 1000); got == Duplicate {
		t.Fatal("an identity whose expiry W reached is still a duplicate")
	}
}

// TestConcurrentClaimsOfOneIdentity: of the batches that claim the same identities at once, exactly
// one gets each as Remembered.
func TestConcurrentClaimsOfOneIdentity(t *testing.T) {
	s := New(1<<20, 10)
	const ids, claimers = 5000, 8
	remembered := make([][]bool, claimers)
	var wg sync.WaitGroup
	for c := range claimers {
		remembered[c] = make([]bool, ids)
		wg.Go(func() {
			id := func(i int) ID { return ID{uint64(i) * 0x9e3779b97f4a7c15, uint64(i)} }
			for i := range ids {
				s.Prefetch([]ID{id(i + PrefetchAhead)}) // beside claims that grow the tables
				remembered[c][i] = s.Claim(id(i), 100, 0) == Remembered
			}
		})
	}
	wg.Wait()
	for i := range ids {
		n := 0
		for c := range claimers {
			if remembered[c][i] {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("identity %d remembered by %d of %d concurrent claimers, want 1", i, n, claimers)
		}
	}
	if s.Len() != ids {
		t.Fatalf("%d held, want %d", s.Len(), ids)
	}
}

// TestCheckpointRoundTrip writes a set's identities and reads them into another: the live ones are
// duplicates there, the expired ones are not written, and a smaller set keeps what fits.
func TestCheckpointRoundTrip(t *testing.T) {
	s := New(1000, 10)
	for i := range uint64(300) {
		s.Claim(ID{i, i * 3}, 100+int64(i%2)*200, 50) // even: expiry 100, odd: 300
	}
	b := s.AppendTo(nil, 100) // W 100: the even ones have expired
	r := New(1000, 10)
	restore, dropped, err := r.Decode(b)
	if err != nil || dropped != 0 {
		t.Fatalf("Decode: %v, %d dropped", err, dropped)
	}
	restore()
	if r.Len() != 150 {
		t.Fatalf("restored %d identities, want the 150 live ones", r.Len())
	}
	for i := range uint64(300) {
		got := r.Claim(ID{i, i * 3}, 300, 100)
		if want := map[bool]Claim{true: Duplicate, false: Remembered}[i%2 == 1]; got != want {
			t.Fatalf("identity %d after restore: %v, want %v", i, got, want)
		}
	}
	small := New(40, 10)
	restore, dropped, err = small.Decode(b)
	if err != nil || dropped != 110 {
		t.Fatalf("Decode into a set of 40: %v, %d dropped, want 110", err, dropped)
	}
	restore()
	if small.Len() != 40 {
		t.Fatalf("a set of 40 restored %d", small.Len())
	}
	// Every truncation is refused, and leaves the set as it was.
	for n := range len(b) {
		if _, _, err := New(1000, 10).Decode(b[:n]); err == nil {
			t.Fatalf("a checkpoint cut to %d of %d bytes was read", n, len(b))
		}
	}
}

// FuzzDecode: no input makes Decode panic or restore more identities than the set holds.
func FuzzDecode(f *testing.F) {
	s := New(100, 10)
	for i := range uint64(20) {
		s.Claim(ID{i, i}, 100, 0)
	}
	f.Add(s.AppendTo(nil, 0))
	f.Add([]byte{0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := New(10, 10)
		restore, _, err := r.Decode(b)
		if err != nil {
			return
		}
		restore()
		if r.Len() > 10 {
			t.Fatalf("restored %d identities into a set of 10", r.Len())
		}
	})
}

// Bytes is what a full set takes. A million identities: 15,625 a shard on average, 16,125 with
// four standard deviations (4 × 125); tables of 32,768 slots of 24 bytes, the least power of two at
// least twice 16,126; plus the set itself, 4120 bytes (three int64s and 64 shards of a cache line).
// 64 × 16,385: 16,897 with the margin, tables of 65,536 slots, twice the bytes an identity.
func TestBytesOfAFullSet(t *testing.T) {
	const set = 3*8 + 64*64
	if got, want := Bytes(1_000_000), int64(64*32768*24+set); got != want {
		t.Errorf("Bytes(1e6) = %d, want %d", got, want)
	}
	if got, want := Bytes(64*16385), int64(64*65536*24+set); got != want {
		t.Errorf("Bytes(64 x 16385) = %d, want %d", got, want)
	}
}

// Before any W (math.MinInt64, the engine's NoWatermark), the ticker's Forget and a checkpoint find
// nothing expired and no slot free: the tables keep their size, and the checkpoint restores.
func TestBeforeAnyWatermark(t *testing.T) {
	const noW = math.MinInt64
	s := New(1000, 10)
	for i := range 100 {
		if c := s.Claim(idOf(uint64(i)), 50, noW); c != Remembered {
			t.Fatalf("claim %d: %v", i, c)
		}
	}
	slots := func(s *Set) (n int) {
		for i := range s.shards {
			n += len(s.shards[i].slots)
		}
		return n
	}
	before := slots(s)
	for range 20 {
		s.Forget(noW)
	}
	if slots(s) != before || s.Len() != 100 {
		t.Fatalf("after Forget before any W: %d slots (were %d), %d held (want 100)", slots(s), before, s.Len())
	}
	r := New(1000, 10)
	restore, dropped, err := r.Decode(s.AppendTo(nil, noW))
	if err != nil || dropped != 0 {
		t.Fatalf("a checkpoint taken before any W: %v, %d dropped", err, dropped)
	}
	restore()
	for i := range 100 {
		if c := r.Claim(idOf(uint64(i)), 50, 0); c != Duplicate {
			t.Fatalf("restored identity %d: %v, want Duplicate", i, c)
		}
	}
}
