package viewextension

import "github.com/windowaggregator/windowaggregator/internal/view"

// rateSpan is how many readings of the history a rate spans: the page's charts and the health
// strip's late records per second are the difference of two readings rateSpan apart (fewer at the
// start) over the time between them. Batches come a fraction of a second apart, so that a rate over
// one second jumps with how many of them fell into it; over five it stays near the true rate.
const rateSpan = 5

// heldBySource is ComponentView.HeldBy when the sources' watermarks hold W.
const heldBySource = "source"

// healthOf is what an operator reads first of component v: W's lag and what holds it; when the
// sources hold it (not the clock, which clamps every source alike when they stamp ahead of it), the
// one source holding it back and how far behind the next source it is, or how many hold it
// together; and the late records per second over the last readings of its history.
func healthOf(v *view.ComponentView, samples []view.ComponentSample) *view.Health {
	h := &view.Health{}
	if v.HeldBy == heldBySource {
		h.TiedSources = v.SourcesAtW
		holder(h, v.Sources)
	}
	if n := len(samples); n >= 2 {
		last, first := samples[n-1], samples[max(0, n-1-rateSpan)]
		if secs := last.WallClock.Sub(first.WallClock).Seconds(); secs > 0 {
			per := func(a, b int64) float64 { return float64(max(0, a-b)) / secs }
			h.LateRoutedPerSecond = per(last.LateRecords.Routed, first.LateRecords.Routed)
			h.LateDroppedPerSecond = per(last.LateRecords.Dropped, first.LateRecords.Dropped)
			h.LatePassedPerSecond = per(last.LateRecords.Passed, first.LateRecords.Passed)
		}
	}
	return h
}

// holder sets h's source holding W back, from sources as Engine.Sources lists them: the holder
// first, then the others by their watermark, least first; the next one not idle is how far behind
// the holder is.
func holder(h *view.Health, sources []view.SourceView) {
	if len(sources) == 0 || !sources[0].HoldsBack {
		return
	}
	s := sources[0]
	h.Holder, h.HolderIsShared = s.Source, s.Shared
	if len(sources) > 1 && s.Watermark != nil {
		if n := sources[1]; n.Watermark != nil && !n.Idle {
			behind := n.Watermark.Sub(*s.Watermark).Seconds()
			h.HolderBehindSeconds = &behind
		}
	}
}
