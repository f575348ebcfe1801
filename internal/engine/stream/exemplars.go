package stream

// The exemplars' state: a pane's reservoirs, the free ones of dropped panes, and their encoding in
// a snapshot. A window's max exemplar is found in emit.go (windowMaxExemplar).

import "github.com/windowaggregator/windowaggregator/internal/engine/exemplar"

// paneExemplars are one pane's exemplars: of all its records, for its slide's point and the max of
// the windows it is in, and of its delta, for a late firing's point.
type paneExemplars struct {
	all, delta exemplar.Reservoir
}

func newPaneExemplars(size int) *paneExemplars {
	pe := &paneExemplars{}
	pe.all.Init(size)
	pe.delta.Init(size)
	return pe
}

// exemplarsFree are exemplar reservoirs of dropped panes, to be used again.
type exemplarsFree []*paneExemplars

// get returns empty reservoirs of size exemplars.
func (f *exemplarsFree) get(size int) *paneExemplars {
	k := len(*f)
	if k == 0 {
		return newPaneExemplars(size)
	}
	pe := (*f)[k-1]
	(*f)[k-1] = nil
	*f = (*f)[:k-1]
	pe.all.Init(size)
	pe.delta.Init(size)
	return pe
}

func (f *exemplarsFree) put(pe *paneExemplars) {
	if pe != nil {
		*f = append(*f, pe)
	}
}

// encodeReservoir writes exemplars that may be absent (nil).
func encodeReservoir(enc *encoder, r *exemplar.Reservoir) {
	enc.bool(r != nil)
	if r != nil {
		enc.b = r.AppendBinary(enc.b)
	}
}

// decodeExemplars reads exemplars that AppendBinary wrote into dst, which keeps what a reservoir of its
// size would have kept of them; a nil dst drops them. They are read into d's scratch reservoir first,
// which holds any number up to MaxExemplars.
func decodeExemplars(d *decoder, dst *exemplar.Reservoir) {
	if d.err != nil {
		return
	}
	if d.exemplars == nil {
		d.exemplars = exemplar.New(MaxExemplars)
	}
	rest, err := d.exemplars.Decode(d.b)
	if err != nil {
		d.fail()
		return
	}
	d.b = rest
	if dst != nil {
		dst.Merge(d.exemplars)
	}
}
