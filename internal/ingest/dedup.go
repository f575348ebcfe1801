package ingest

import (
	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// Dedup: the identities of the records aggregated are remembered (internal/dedup), so that a copy
// that arrives again is a duplicate, taken by no aggregation. A record's identity is read by its
// signal's reader (identity): a span's trace id, span id and kind; a metric point's input stream, type,
// unit and timestamps; a log record's parts that dedup.logs.key lists. It is looked up before the
// record's OTTL, its weight and, for a metric point, its input stream; an identity remembered for a
// record that then is aggregated by none is let go again.

// dedupStage is dedup's part of one ingest call: the claim of each record's identity, at the first
// aggregation that selects the record, through a claimer that keeps the slice of event time of the
// record before (records mostly come in order); the releases of identities whose records no
// aggregation took, made together before the call's records are applied; and the overflows.
type dedupStage struct {
	set     *dedup.Set
	claimer dedup.Claimer
	// current is the item of the record being staged, claimed Remembered (remembered) by it
	current    dedup.Item
	remembered bool
	releases   []dedup.Item
	overflows  int64
}

// begin readies the stage for a call whose records set deduplicates (nil: none).
func (d *dedupStage) begin(set *dedup.Set) {
	d.set, d.remembered, d.overflows = set, false, 0
	if set != nil {
		d.claimer = set.Claimer()
	}
}

// on reports whether the call's records are deduplicated.
func (d *dedupStage) on() bool { return d.set != nil }

// claim is the claim of the record being staged (at t, which Check found on time, judged by batch
// b), looked up at the first aggregation that selects it: Duplicate for a copy. A record without an
// identity is not looked up (Passed).
func (d *dedupStage) claim(src recordSource, t int64, b *stream.Batch) dedup.Claim {
	d.remembered = false
	id, ok := src.identity()
	if !ok {
		return dedup.Passed
	}
	it := dedup.Item{ID: id, Time: t, Expiry: b.ExpiresAt(t)}
	c := d.claimer.Claim(it, b.Watermark())
	switch c {
	case dedup.Remembered:
		d.current, d.remembered = it, true
	case dedup.Overflow:
		d.overflows++
	}
	return c
}

// settle ends the record being staged: an identity it remembered is let go unless the record was
// aggregated, so that a copy is judged as this one was. Without dedup it has nothing to do.
func (d *dedupStage) settle(aggregated bool) {
	if d.remembered && !aggregated {
		d.releases = append(d.releases, d.current)
	}
	d.remembered = false
}

// release lets go, together, the identities set aside, and gives back the room the claimer did not
// take; before the call's records are applied, under the ingest gate, so that no checkpoint holds
// them. Without dedup it has nothing to do.
func (d *dedupStage) release() {
	d.claimer.Done()
	for _, it := range d.releases {
		d.set.Release(it.ID, it.Time)
	}
	d.releases = d.releases[:0]
}

// reset drops the stage's references, for the scratch's pool.
func (d *dedupStage) reset() {
	d.set, d.claimer = nil, dedup.Claimer{}
	d.releases = d.releases[:0]
}

// LogKey is the set of the parts of a log record that identify it (dedup.logs.key), a bit per index
// of the parts, in the order of the configuration's LogPart values.
type LogKey uint16
