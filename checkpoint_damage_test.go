package windowaggregator

import (
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
)

// A small checkpoint of one open window, from a run with storage: its value, and the parts of the
// remembered identities beside it.
func smallCheckpoint(t *testing.T) (data []byte, parts map[string][]byte) {
	t.Helper()
	st := &memStorage{data: map[string][]byte{}}
	runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10, id: 1}})
	parts = st.snapshot()
	data = parts[checkpoint.Key]
	if len(data) == 0 {
		t.Fatal("no checkpoint saved")
	}
	delete(parts, checkpoint.Key)
	return data, parts
}

// restoreOutcome starts a connector on a storage holding data (and parts, the identities' parts),
// sends a span into the window the checkpoint holds and one that closes it, and returns the count of
// that window and the restored and restore_failed counters.
func restoreOutcome(t *testing.T, data []byte, parts map[string][]byte) (count float64, restored, failed int64) {
	t.Helper()
	st := &memStorage{data: map[string][]byte{checkpoint.Key: data}}
	maps.Copy(st.data, parts)
	ps, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 2, ms: 10}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
	for _, p := range find(ps, "lat.count", attrsAX) {
		if p.start == 0 {
			count = p.value
		}
	}
	return count, counterValue(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}),
		counterValue(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restore_failed"})
}

// Every single-bit flip of a checkpoint, every truncation, garbage and another version are detected:
// the state is discarded (the window counts the one span sent after the start, not the saved one
// too), counted as restore_failed, and the component runs.
func TestDamagedCheckpointIsNeverRestored(t *testing.T) {
	useFakeClock(t)
	good, parts := smallCheckpoint(t)
	if len(parts) == 0 {
		t.Fatal("no part of remembered identities saved beside the checkpoint")
	}
	if count, restored, _ := restoreOutcome(t, good, parts); count != 2 || restored != 1 {
		t.Fatalf("the undamaged checkpoint: count %v, restored %d; want 2 and 1", count, restored)
	}
	check := func(what string, data []byte, parts map[string][]byte) {
		t.Helper()
		count, restored, failed := restoreOutcome(t, data, parts)
		if count != 1 || restored != 0 || failed != 1 {
			t.Fatalf("%s: count %v, restored %d, restore_failed %d; want 1, 0, 1", what, count, restored, failed)
		}
	}
	for i := range good {
		for bit := range 8 {
			d := append([]byte(nil), good...)
			d[i] ^= 1 << bit
			check("bit "+strconv.Itoa(bit)+" of byte "+strconv.Itoa(i), d, parts)
		}
	}
	for n := 1; n < len(good); n++ {
		check("truncated to "+strconv.Itoa(n)+" bytes", good[:n], parts)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		g := make([]byte, rng.IntN(2*len(good))+1)
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		check("garbage", g, parts)
	}
	other := append([]byte(nil), good...)
	other[len(checkpoint.Magic)] = checkpoint.Version + 1
	check("another version", other, parts)
	// The parts of the remembered identities: every bit flip and truncation of each, and a missing one.
	flips := 0
	for key, part := range parts {
		for i := range part {
			for bit := range 8 {
				d := maps.Clone(parts)
				d[key] = append([]byte(nil), part...)
				d[key][i] ^= 1 << bit
				check("bit "+strconv.Itoa(bit)+" of byte "+strconv.Itoa(i)+" of "+key, good, d)
				flips++
			}
		}
		for n := range len(part) {
			d := maps.Clone(parts)
			d[key] = part[:n]
			check("part "+key+" truncated to "+strconv.Itoa(n)+" bytes", good, d)
		}
		d := maps.Clone(parts)
		delete(d, key)
		check("part "+key+" missing", good, d)
	}
	t.Logf("%d-byte checkpoint: %d bit flips, %d truncations, 50 garbage values, another version refused; %d parts: %d bit flips, truncations and a missing one refused",
		len(good), 8*len(good), len(good)-1, len(parts), flips)
}

// A storage whose client cannot be opened, or whose library panics opening it (bbolt on a damaged
// file), does not stop the component: it runs without durable state, counts open_failed, and saves
// once the storage opens at a later checkpoint.
func TestStorageThatCannotOpenDoesNotStopTheComponent(t *testing.T) {
	for name, st := range map[string]*memStorage{
		"error": {data: map[string][]byte{}, failOpen: errors.New("invalid database")},
		"panic": {data: map[string][]byte{}, panicOpen: true},
	} {
		t.Run(name, func(t *testing.T) {
			useFakeClock(t)
			cfg := latencyConfig()
			ps, tel := runStorageEach(t, cfg, st, func(b []spanSpec) {
				if b[0].end > 10 { // before the second batch the storage is mended
					st.mu.Lock()
					st.failOpen, st.panicOpen = nil, false
					st.mu.Unlock()
				}
			}, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
			wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1) // it aggregated
			wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "open_failed"}, 1)
			// Saved once the storage opened: when [0,10) fired and at shutdown (how many times depends
			// on which of the component's goroutines collects the firing first).
			if n := counterValue(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "saved"}); n < 1 {
				t.Fatalf("checkpoints saved %d, want some once the storage opened", n)
			}
			if len(st.data[checkpoint.Key]) == 0 {
				t.Fatal("no checkpoint once the storage opened")
			}
		})
	}
}

// An empty value (a zero-length checkpoint file) is empty storage, counted as such.
func TestEmptyCheckpointStartsClean(t *testing.T) {
	useFakeClock(t)
	count, restored, failed := restoreOutcome(t, []byte{}, nil)
	if count != 1 || restored != 0 || failed != 0 {
		t.Fatalf("count %v, restored %d, restore_failed %d; want 1, 0, 0", count, restored, failed)
	}
}
