package windowaggregator

import (
	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// Dedup: the identities of the records aggregated are remembered (internal/dedup), so that a copy
// that arrives again is a duplicate, taken by no aggregation. A record's identity is read by its
// signal's reader (identity): a span's trace id, span id and kind; a metric point's input stream, type,
// unit and timestamps; a log record's parts that dedup.logs.key lists. It is looked up before the
// record's OTTL, its weight and, for a metric point, its input stream; an identity remembered for a
// record that then is aggregated by none is let go again.

// newDedup returns the component's remembered identities, one set for every signal, and, by input,
// the set of each signal whose records are deduplicated (nil: none).
func newDedup(cfg *Config) (set *dedup.Set, byInput [numInputs]*dedup.Set) {
	if !cfg.Dedup.Enabled {
		return nil, byInput
	}
	set = dedup.New(cfg.Dedup.MaxIDs, dedup.SliceWidth(int64(cfg.Window.slide())))
	for input, sg := range signals {
		if sg != logSignal || cfg.Dedup.Logs != nil {
			byInput[input] = set
		}
	}
	return set, byInput
}

// identitiesAhead reads the identities and times of a call's records by their place in the call (a
// record's tag), ahead of staging them, so that they are claimed together (dedupStage.claimAhead).
type identitiesAhead interface {
	records() int
	identityAt(i int) (id dedup.ID, t int64, ok bool)
}

// dedupStage is dedup's part of one ingest call: the claims of its records' identities, made ahead
// of staging for the whole call where the signal reads identities by place (spans), else a record at
// a time; the releases of identities whose records no aggregation took, made together before the
// call's records are applied; and the overflows, counted for the records an aggregation selects.
type dedupStage struct {
	set *dedup.Set
	// ahead: the call's claims were made ahead; byTag is then each record's item, or -1 for a record
	// not claimed (no identity, or a time that is invalid or in the future)
	ahead  bool
	byTag  []int32
	items  []dedup.Item
	claims []dedup.Claim
	order  []int32
	// current is the item of the record being staged, claimed Remembered (remembered) by it
	current    dedup.Item
	remembered bool
	releases   []dedup.Item
	overflows  int64
}

// begin readies the stage for a call whose records set deduplicates (nil: none).
func (d *dedupStage) begin(set *dedup.Set) {
	d.set, d.ahead, d.remembered, d.overflows = set, false, false, 0
}

// on reports whether the call's records are deduplicated.
func (d *dedupStage) on() bool { return d.set != nil }

// claimAhead claims the identities of every record of the call, judged by batch b: those of records
// whose time is invalid or in the future are not claimed (such records are staged for no
// aggregation).
func (d *dedupStage) claimAhead(a identitiesAhead, b *stream.Batch) {
	n := a.records()
	d.ahead = true
	d.byTag, d.items = d.byTag[:0], d.items[:0]
	for i := range n {
		id, t, ok := a.identityAt(i)
		if !ok || b.Check(t) != stream.OnTime {
			d.byTag = append(d.byTag, -1)
			continue
		}
		d.byTag = append(d.byTag, int32(len(d.items)))
		d.items = append(d.items, dedup.Item{ID: id, Time: t, Expiry: b.ExpiresAt(t)})
	}
	if cap(d.claims) < len(d.items) {
		d.claims = make([]dedup.Claim, len(d.items))
	}
	d.claims = d.claims[:len(d.items)]
	d.order = d.set.Claims(d.items, b.Watermark(), d.claims, d.order)
}

// claim is the claim of the record being staged (tag, at t, which Check found on time), looked up
// at the first aggregation that selects it: Duplicate for a copy. A record without an identity is not
// looked up (Passed).
func (d *dedupStage) claim(src recordSource, tag int32, t int64, b *stream.Batch) dedup.Claim {
	d.remembered = false
	var it dedup.Item
	var c dedup.Claim
	if d.ahead {
		i := d.byTag[tag]
		if i < 0 {
			return dedup.Passed
		}
		it, c = d.items[i], d.claims[i]
	} else {
		id, ok := src.identity()
		if !ok {
			return dedup.Passed
		}
		it = dedup.Item{ID: id, Time: t, Expiry: b.ExpiresAt(t)}
		c = d.set.Claim(it, b.Watermark())
	}
	switch c {
	case dedup.Remembered:
		d.current, d.remembered = it, true
	case dedup.Overflow:
		d.overflows++
	}
	return c
}

// settle ends the record being staged: an identity it remembered is let go unless the record was
// aggregated, so that a copy is judged as this one was. Claims made ahead for records that no
// aggregation selected are let go too.
func (d *dedupStage) settle(tag int32, aggregated bool) {
	switch {
	case d.remembered:
		if !aggregated {
			d.releases = append(d.releases, d.current)
		}
		d.remembered = false
	case d.ahead:
		if i := d.byTag[tag]; i >= 0 && d.claims[i] == dedup.Remembered && !aggregated {
			d.releases = append(d.releases, d.items[i]) // claimed ahead, and not looked at: selected by none
		}
	}
}

// release lets go, together, the identities settle set aside; before the call's records are applied,
// under the ingest gate, so that no checkpoint holds them.
func (d *dedupStage) release() {
	for _, it := range d.releases {
		d.set.Release(it.ID, it.Time)
	}
	d.releases = d.releases[:0]
}

// reset drops the stage's references, for the scratch's pool.
func (d *dedupStage) reset() {
	d.set = nil
	d.byTag, d.items, d.claims, d.order, d.releases = d.byTag[:0], d.items[:0], d.claims[:0], d.order[:0], d.releases[:0]
}
