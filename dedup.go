package windowaggregator

import (
	"github.com/zeebo/xxh3"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
)

// Dedup: the identities of the records aggregated are remembered (internal/dedup), so that a copy
// that arrives again is a duplicate, taken by no aggregation. A record's identity is read by its
// signal's reader (identity): a span's trace id, span id and kind; a metric point's input stream, type,
// unit and timestamps; a log record's parts that dedup.logs.key lists. It is looked up at the first
// aggregation that selects the record, before its OTTL, its weight and, for a metric point, its input
// stream; an identity remembered for a record that then is aggregated by none is let go again.

// newDedup returns the component's remembered identities, one set for every signal, and, by input,
// the set of each signal whose records are deduplicated (nil: none).
func newDedup(cfg *Config) (set *dedup.Set, byInput [numInputs]*dedup.Set) {
	if !cfg.Dedup.Enabled {
		return nil, byInput
	}
	set = dedup.New(cfg.Dedup.MaxIDs, int64(cfg.Window.slide()))
	for input, sg := range signals {
		if sg != logSignal || cfg.Dedup.Logs != nil {
			byInput[input] = set
		}
	}
	return set, byInput
}

// identityOf is the identity of a record whose identifying parts b holds.
func identityOf(b []byte) dedup.ID {
	h := xxh3.Hash128(b)
	return dedup.ID{Hi: h.Hi, Lo: h.Lo}
}

// claim looks the record being staged, at t (which Check found on time), up among the identities
// remembered, and remembers its identity if it is new, until W passes the end of its last window
// plus allowed_lateness: Duplicate for a copy. A record without an identity (a span without valid
// ids) is not looked up.
func (run *ingestRun) claim(t int64) dedup.Claim {
	b := run.b
	id, ok := run.identity()
	if !ok {
		return dedup.Passed
	}
	c := run.ids.Claim(id, b.ExpiresAt(t), b.Watermark())
	switch c {
	case dedup.Remembered:
		run.claimed, run.claimedID = true, id
	case dedup.Overflow:
		run.tl.dedupOverflow++
	}
	return c
}

// identity is the identity of the record being staged. Where the call's signal can read its records'
// identities by their place (run.ahead), it reads those of the next records too, readAheadRecords at
// a time, and has the slots of the next dedup.PrefetchAhead prefetched, so that their claims find them
// in cache; each is read once. A call whose records are not claimed (not selected, or not on time)
// reads no identity.
func (run *ingestRun) identity() (dedup.ID, bool) {
	if run.ahead == nil {
		return run.r.src.identity()
	}
	tag := int(run.rec.Tag)
	if tag >= run.readAhead { // not read ahead: records before it were not claimed
		run.sc.ids = append(run.sc.ids[:0], identityAt(run.ahead, tag))
		run.aheadFrom, run.readAhead, run.prefetched = tag, tag+1, tag+1
	}
	n := run.ahead.records()
	if run.readAhead <= tag+dedup.PrefetchAhead && run.readAhead < n {
		// The next records' identities, several at once: their records' reads overlap too.
		to := min(n, run.readAhead+readAheadRecords)
		for i := run.readAhead; i < to; i++ {
			run.sc.ids = append(run.sc.ids, identityAt(run.ahead, i))
		}
		run.readAhead = to
	}
	if from, to := max(run.prefetched, tag+1), min(run.readAhead, tag+1+dedup.PrefetchAhead); to > from {
		run.ids.Prefetch(run.sc.ids[from-run.aheadFrom : to-run.aheadFrom]) // not those passed
		run.prefetched = to
	}
	id := run.sc.ids[tag-run.aheadFrom]
	return id, id != noIdentity
}

// readAheadRecords is how many records' identities are read ahead at once.
const readAheadRecords = 32

// identitiesAhead reads the identities of a call's records by their place in the call (a record's
// tag), ahead of staging them.
type identitiesAhead interface {
	records() int
	identityAt(i int) (dedup.ID, bool)
}

// identityAt is the identity of record i, noIdentity for none.
func identityAt(a identitiesAhead, i int) dedup.ID {
	if id, ok := a.identityAt(i); ok {
		return id
	}
	return noIdentity
}

// noIdentity stands, among identities read ahead, for a record without one. A record whose identity
// hashes to it is not deduplicated: never taken for a copy.
var noIdentity dedup.ID
