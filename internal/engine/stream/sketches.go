package stream

// The percentile and exponential histogram outputs' state: a sketch per pane (internal/engine/sketch),
// what a record inserts into it, the free sketches of dropped panes, and their encoding in a
// snapshot. A window's sketch is merged from its panes' in emit.go (windowSketch for sliding windows).

import "github.com/windowaggregator/windowaggregator/internal/engine/sketch"

// insertItem inserts the item's values into sketch h (nil: none), with their count.
func insertItem(h *sketch.Histogram, it *item) {
	switch {
	case h == nil:
	case it.dist != nil:
		if !it.dist.NoValues {
			h.Merge(it.dist.Sketch)
		}
	case it.hasValue:
		h.InsertN(it.v, it.n)
	}
}

// newSketch is the one place that picks the sketch's parameters.
func newSketch() *sketch.Histogram { return sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets) }

// sketchFree are sketches of dropped panes, to be used again.
type sketchFree []*sketch.Histogram

// get returns an empty sketch.
func (f *sketchFree) get() *sketch.Histogram {
	n := len(*f)
	if n == 0 {
		return newSketch()
	}
	h := (*f)[n-1]
	(*f)[n-1] = nil
	*f = (*f)[:n-1]
	h.Reset()
	return h
}

func (f *sketchFree) put(h *sketch.Histogram) {
	if h != nil {
		*f = append(*f, h)
	}
}

func encodeSketch(enc *encoder, h *sketch.Histogram) {
	enc.bool(h != nil)
	if h != nil {
		enc.b = h.AppendBinary(enc.b)
	}
}

// decodeSketch reads a sketch if one is present and wanted; one present but not wanted, or wanted
// but absent, is corrupt.
func decodeSketch(d *decoder, want bool) *sketch.Histogram {
	present := d.bool()
	if d.err != nil || present != want {
		d.fail()
		return nil
	}
	if !present {
		return nil
	}
	return readSketch(d)
}

// readSketch reads one sketch's encoding.
func readSketch(d *decoder) *sketch.Histogram {
	h := newSketch()
	n, err := h.UnmarshalBinary(d.b)
	if err != nil {
		d.fail()
		return nil
	}
	d.b = d.b[n:]
	return h
}

// decodeOptionalSketch reads a sketch that may be absent, and must be when not allowed.
func decodeOptionalSketch(d *decoder, allowed bool) *sketch.Histogram {
	present := d.bool()
	if d.err != nil || !present {
		return nil
	}
	if !allowed {
		d.fail()
		return nil
	}
	return readSketch(d)
}
