package dedup

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// The test's slides: a record at t expires at the end of its slide plus lifetime, as a window
// aggregation's identities do (every identity of a slide expires together).
const (
	testSlide    = 16
	testLifetime = 40
)

func expiryOf(t int64) int64 { return (t/testSlide+1)*testSlide + testLifetime }

// claimAll claims items at W w, in order, through one claimer, as an ingest call does.
func claimAll(s *Set, items []Item, w int64) []Claim {
	c := s.Claimer()
	defer c.Done()
	out := make([]Claim, len(items))
	for i, it := range items {
		out[i] = c.Claim(it, w)
	}
	return out
}

// claim claims one item at W w.
func claim(s *Set, it Item, w int64) Claim { return claimAll(s, []Item{it}, w)[0] }

// modelEntry is what the reference model knows of an identity: claimed Remembered, at time t, and
// not released since.
type modelEntry struct{ t int64 }

// TestClaimAgainstModel drives a set with random batches of claims (copies within a batch among
// them), releases, forgets and advances of W, over a small pool of identities, and checks each
// answer against a map of what was remembered: a duplicate only of an identity remembered and not
// yet expired (never a false positive), every such one a duplicate, Passed exactly for records W has
// passed, an overflow only with the set full, and after a forget exactly the live identities held
// (with slices no wider than a slide).
func TestClaimAgainstModel(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		maxIDs := 1 + rng.IntN(60)
		// Slices of 1 to 32: those of 32 span two slides, and keep the identities of the earlier one
		// until the later expires.
		shift := uint8(rng.IntN(6))
		s := New(maxIDs, shift)
		model := map[ID]modelEntry{}
		// An identity stands for one record: a copy has its original's time.
		pool := make([]Item, 1+rng.IntN(150))
		w := int64(rng.IntN(100))
		for i := range pool {
			t := w + int64(rng.IntN(200)) - 20
			pool[i] = Item{ID: Fold(rng.Uint64()), Time: t, Expiry: expiryOf(t)}
		}
		live := func() int {
			n := 0
			for _, e := range model {
				if expiryOf(e.t) > w {
					n++
				}
			}
			return n
		}
		for op := range 2000 {
			switch r := rng.IntN(100); {
			case r < 70:
				items := make([]Item, 1+rng.IntN(12))
				for i := range items {
					items[i] = pool[rng.IntN(len(pool))]
				}
				out := make([]Claim, len(items))
				before := s.Len()
				out = claimAll(s, items, w)
				for i, it := range items {
					e, known := model[it.ID]
					was := known && expiryOf(e.t) > w
					got := out[i]
					switch {
					case it.Expiry <= w && got != Passed:
						t.Fatalf("seed %d op %d: expiry %d, W %d: got %v, want Passed", seed, op, it.Expiry, w, got)
					case it.Expiry <= w:
					case was && got != Duplicate:
						t.Fatalf("seed %d op %d: identity remembered at %d, W %d: got %v, want Duplicate", seed, op, e.t, w, got)
					case !was && got == Duplicate:
						t.Fatalf("seed %d op %d: identity not remembered (known %v), W %d: got Duplicate", seed, op, known, w)
					case got == Overflow && before < maxIDs && s.Len() < maxIDs:
						t.Fatalf("seed %d op %d: Overflow with %d of %d held", seed, op, s.Len(), maxIDs)
					}
					if got == Remembered {
						model[it.ID] = modelEntry{it.Time}
					}
				}
			case r < 80:
				it := pool[rng.IntN(len(pool))]
				if e, ok := model[it.ID]; ok && expiryOf(e.t) > w && rng.IntN(2) == 0 {
					s.Release(it.ID, it.Time)
					delete(model, it.ID)
				}
			case r < 95:
				w += int64(rng.IntN(8))
				for id, e := range model {
					if expiryOf(e.t) <= w {
						delete(model, id) // forgotten: a copy is Passed
					}
				}
			default:
				s.Forget(w)
				if n := s.Len(); n < live() || n != live() && 1<<shift <= testSlide {
					t.Fatalf("seed %d op %d: after Forget with slices of %d, %d held, want the %d live", seed, op, 1<<shift, n, live())
				}
			}
			if n := s.Len(); n > maxIDs || n < live() {
				t.Fatalf("seed %d op %d: %d held, at most %d, at least the %d live", seed, op, n, maxIDs, live())
			}
		}
	}
}

// TestACopyIsFoundInItsSliceAfterItsNeighboursAreDropped: slices expire whole, by their own expiry;
// a record whose slice outlives the slices around it (records far apart in event time) is still
// found, however many slices before and after it were dropped.
func TestACopyIsFoundInItsSliceAfterItsNeighboursAreDropped(t *testing.T) {
	s := New(1000, 0)
	// Slices 100..109, each with one identity, expiring at their time + 5; and slice 200, whose
	// identity expires at 1000.
	items := []Item{{ID: 7, Time: 200, Expiry: 1000}}
	for i := range int64(10) {
		items = append(items, Item{ID: ID(1000 + i), Time: 100 + i, Expiry: 105 + i})
	}
	items = append(items, Item{ID: 8, Time: 300, Expiry: 310})
	out := claimAll(s, items, 0)
	for i, c := range out {
		if c != Remembered {
			t.Fatalf("item %d: %v", i, c)
		}
	}
	s.Forget(400) // every slice but 200's
	if s.Slices() != 1 || s.Len() != 1 {
		t.Fatalf("after Forget: %d slices, %d identities, want 1 and 1", s.Slices(), s.Len())
	}
	copies := []Item{{ID: 7, Time: 200, Expiry: 1000}, {ID: 8, Time: 300, Expiry: 310}, {ID: 7, Time: 201, Expiry: 1000}}
	out = claimAll(s, copies, 400)
	if out[0] != Duplicate || out[1] != Passed || out[2] != Remembered {
		t.Fatalf("copies: %v, want [Duplicate Passed Remembered] (the same id at another time is another slice's)", out)
	}
}

// TestOverflowNeverDropsANewRecord fills a set and checks that every identity past the maximum is an
// Overflow, never a Duplicate, and that once W passes the held ones' expiry a forget makes room.
func TestOverflowNeverDropsANewRecord(t *testing.T) {
	s := New(100, 3)
	for i := range 100 {
		if c := claim(s, Item{ID: Fold(uint64(i) + 10), Time: int64(i), Expiry: 1000}, 0); c != Remembered {
			t.Fatalf("identity %d: %v", i, c)
		}
	}
	for i := range 50 {
		if c := claim(s, Item{ID: Fold(uint64(i) + 500), Time: int64(i), Expiry: 1000}, 0); c != Overflow {
			t.Fatalf("identity %d past the maximum: %v, want Overflow", i, c)
		}
	}
	s.Forget(1000)
	if c := claim(s, Item{ID: 42, Time: 2000, Expiry: 3000}, 1000); c != Remembered || s.Len() != 1 {
		t.Fatalf("after the held expired: %v with %d held", c, s.Len())
	}
}

// TestConcurrentClaimsOfOneIdentity: of copies claimed side by side, exactly one is Remembered.
func TestConcurrentClaimsOfOneIdentity(t *testing.T) {
	for round := range 50 {
		s := New(1<<20, 30)
		const workers, ids = 4, 2000
		var remembered [ids]int32
		var mu sync.Mutex
		var wg sync.WaitGroup
		for wk := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(wk)))
				items := make([]Item, ids)
				for i := range items {
					t := int64(1e9 + i*1e6)
					items[i] = Item{ID: Fold(uint64(i)*0x9e3779b97f4a7c15 + 1), Time: t, Expiry: 1 << 60}
				}
				rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
				var out []Claim
				for from := 0; from < len(items); from += 100 {
					out = append(out, claimAll(s, items[from:from+100], 0)...)
				}
				mu.Lock()
				for i, c := range out {
					if c == Remembered {
						remembered[(items[i].Time-1e9)/1e6]++
					}
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		for i, n := range remembered {
			if n != 1 {
				t.Fatalf("round %d: identity %d remembered %d times", round, i, n)
			}
		}
		if s.Len() != ids {
			t.Fatalf("round %d: %d held, want %d", round, s.Len(), ids)
		}
	}
}

// memParts is a storage of parts by index.
type memParts map[int64][]byte

func (m memParts) get(idx int64) ([]byte, bool) { b, ok := m[idx]; return b, ok }

// save takes a checkpoint of s at w into st, as the component does, and returns its directory.
func save(s *Set, st memParts, w int64) []byte {
	m := s.Mark(w)
	dir := m.Directory()
	for _, p := range m.Parts() {
		st[p.Index] = p.Data
	}
	for _, idx := range m.Stale() {
		delete(st, idx)
	}
	m.Done(true)
	return dir
}

// TestCheckpointWritesWhatChanged: a checkpoint writes the slices that changed since the previous
// one; a restore from the parts holds exactly the identities remembered and not expired at the
// checkpoint, and not those claimed after its mark; expired slices' parts are deleted. Slices of 8
// (shift 3): times 0..99 are slices 0..12, slice k expiring with its latest record at 8k+7.
func TestCheckpointWritesWhatChanged(t *testing.T) {
	s := New(10_000, 3)
	st := memParts{}
	claimAt := func(w int64, items ...Item) { claimAll(s, items, w) }
	var first []Item
	for i := range 100 {
		first = append(first, Item{ID: Fold(uint64(i) + 10), Time: int64(i), Expiry: int64(i/10)*10 + 50})
	}
	claimAt(0, first...)
	m := s.Mark(0)
	if len(m.write) != 13 {
		t.Fatalf("first checkpoint writes %d slices, want 13", len(m.write))
	}
	claimAt(0, Item{ID: 5000, Time: 5, Expiry: 50}) // after the mark: not in this checkpoint
	dir := m.Directory()
	for _, p := range m.Parts() {
		st[p.Index] = p.Data
	}
	m.Done(true)

	restoreInto := func(dir []byte) *Set {
		t.Helper()
		d, err := DecodeDirectory(dir)
		if err != nil {
			t.Fatal(err)
		}
		r := New(10_000, 3)
		restore, dropped, same, err := r.Restore(d, st.get)
		if err != nil || dropped != 0 || !same {
			t.Fatalf("restore: %v, dropped %d, same width %v", err, dropped, same)
		}
		restore()
		return r
	}
	r := restoreInto(dir)
	if r.Len() != 100 {
		t.Fatalf("restored %d identities, want the 100 before the mark", r.Len())
	}
	if c := claim(r, Item{ID: 5000, Time: 5, Expiry: 50}, 0); c != Remembered {
		t.Fatalf("the identity claimed after the mark, restored: %v, want Remembered (its record is not in the checkpoint)", c)
	}
	if c := claim(r, first[42], 0); c != Duplicate {
		t.Fatalf("an identity of the checkpoint: %v, want Duplicate", c)
	}

	// Only slice 0 changed since (the identity after the mark); then one new slice.
	claimAt(0, Item{ID: 6000, Time: 105, Expiry: 150})
	m = s.Mark(0)
	if got := len(m.write); got != 2 {
		t.Fatalf("second checkpoint writes %d slices, want 2 (the one changed after the first mark and the new one)", got)
	}
	m.Done(false) // a failed save: written by the next one
	dir = save(s, st, 0)
	if r = restoreInto(dir); r.Len() != 102 {
		t.Fatalf("restored %d identities, want 102", r.Len())
	}
	// W passes slices 0..6 (slice k expires at ((8k+7)/10)*10+50, at most 100 for k <= 6): their
	// parts go; slices 7..12 (times 56..99) and 13 (the identity at 105) stay.
	dir = save(s, st, 100)
	if _, ok := st[0]; ok || len(st) != 7 {
		t.Fatalf("after W passed slices 0..6: %d parts (want 7), slice 0's still there: %v", len(st), ok)
	}
	if r = restoreInto(dir); r.Len() != 45 {
		t.Fatalf("restored %d identities, want 45", r.Len())
	}

	// A damaged or missing part is detected.
	st[9][len(st[9])-1] ^= 1
	d, _ := DecodeDirectory(dir)
	if _, _, _, err := New(10, 3).Restore(d, st.get); err == nil {
		t.Fatal("a damaged part was restored")
	}
	delete(st, 9)
	if _, _, _, err := New(10, 3).Restore(d, st.get); err == nil {
		t.Fatal("a missing part was restored")
	}
}

// TestRestoreKeepsAtMostMaxIDs: a checkpoint of a larger set restores max_ids identities, and says
// how many it left out; one of another slice width restores none.
func TestRestoreKeepsAtMostMaxIDs(t *testing.T) {
	s := New(1000, 3)
	var items []Item
	for i := range 300 {
		items = append(items, Item{ID: Fold(uint64(i) + 3), Time: int64(i), Expiry: 1 << 40})
	}
	claimAll(s, items, 0)
	st := memParts{}
	d, err := DecodeDirectory(save(s, st, 0))
	if err != nil {
		t.Fatal(err)
	}
	small := New(100, 3)
	restore, dropped, _, err := small.Restore(d, st.get)
	if err != nil || dropped != 200 {
		t.Fatalf("restore into 100: %v, dropped %d, want 200", err, dropped)
	}
	restore()
	if small.Len() != 100 {
		t.Fatalf("%d held, want 100", small.Len())
	}
	other := New(1000, 2)
	restore, dropped, same, err := other.Restore(d, st.get)
	if err != nil || same || dropped != 300 {
		t.Fatalf("restore into another width: %v, same %v, dropped %d", err, same, dropped)
	}
	restore()
	if other.Len() != 0 {
		t.Fatalf("%d held, want 0", other.Len())
	}
}

// FuzzDecode: a directory and a part of any bytes are read without a panic, and a restore of what
// decodes holds no more than the set's maximum.
func FuzzDecode(f *testing.F) {
	s := New(100, 3)
	for i := range 30 {
		claim(s, Item{ID: Fold(uint64(i) * 977), Time: int64(i), Expiry: 100}, 0)
	}
	st := memParts{}
	dir := save(s, st, 0)
	f.Add(dir, st[0])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, dir, part []byte) {
		d, err := DecodeDirectory(dir)
		if err != nil {
			return
		}
		r := New(20, 3)
		restore, _, _, err := r.Restore(d, func(int64) ([]byte, bool) { return part, true })
		if err != nil {
			return
		}
		restore()
		if r.Len() > 20 {
			t.Fatalf("%d held, more than 20", r.Len())
		}
	})
}

// TestBytesPerIdentity: a full set of a million identities or of the default five million takes at
// most Footprint's 12 bytes an identity, with records in order at a steady rate. (A set of ten
// thousand is mostly its newest slice, whose table was just grown: the figure is in bench/README.)
func TestBytesPerIdentity(t *testing.T) {
	for _, n := range []int{1_000_000, 5_000_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			per := bytesPerIdentity(n)
			if per > bytesPerID {
				t.Fatalf("%.1f bytes an identity, more than %d", per, bytesPerID)
			}
			t.Logf("%.2f bytes an identity", per)
		})
	}
}
