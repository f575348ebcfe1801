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
	id, ok := run.r.src.identity()
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
