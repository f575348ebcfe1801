package stream

import "math"

// Times are Unix nanoseconds. minTime and maxTime are the engine's minus and plus infinity (maxTime is
// in the year 2116): far enough from the int64 limits that adding a window size and a lateness, each
// at most maxDuration, to them cannot overflow.
const (
	minTime int64 = math.MinInt64 / 2
	maxTime int64 = math.MaxInt64 / 2
)

// windowing holds the window geometry: size, slide and offset (in [0, slide): windows start at
// offset + k × slide), and the allowed lateness, in nanoseconds; and how series make their points (see
// Config).
type windowing struct {
	size, slide, offset, lateness int64
	panesPerWindow                int64
	cumulative, fold              bool
	expiration                    int64
	early                         int64 // the early results' period (tumbling windows); 0: none
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// paneStart returns the start of the pane that holds t.
func (g windowing) paneStart(t int64) int64 { return floorDiv(t-g.offset, g.slide)*g.slide + g.offset }

// lastEnd returns the end of the latest window that contains pane p.
func (g windowing) lastEnd(p int64) int64 { return p + g.size }

// expired reports whether window end e has expired at watermark w.
func (g windowing) expired(e, w int64) bool { return e+g.lateness <= w }

// liveWindowEnds calls fn with the end of each window holding the pane that starts at p (those
// starting in (p - size, p]) that has not expired at watermark w, latest first.
func (g windowing) liveWindowEnds(p, w int64, fn func(end int64)) {
	for start := g.paneStart(p); start > p-g.size; start -= g.slide {
		if end := start + g.size; !g.expired(end, w) {
			fn(end)
		}
	}
}

// classify judges a record in pane p against watermark w.
func (g windowing) classify(p, w int64) Verdict {
	if g.expired(g.lastEnd(p), w) {
		return Expired
	}
	if p+g.slide > w { // the earliest window containing p has not fired: none has
		return OnTime
	}
	// The latest fired window containing p ends at p + j*slide with j = min(k, floor((w-p)/slide)).
	j := floorDiv(w-p, g.slide)
	if j > g.panesPerWindow {
		j = g.panesPerWindow
	}
	if g.expired(p+j*g.slide, w) {
		// Every fired window has expired; the ones left have not fired yet.
		return OnTime
	}
	return LateUpdate
}

// nextBoundary returns the least watermark above w at which the set of fired or of expired windows
// changes: the next window end (offset plus a multiple of slide) or the next expiry (a window end plus
// lateness).
func (g windowing) nextBoundary(w int64) int64 {
	if w >= maxTime {
		return maxTime
	}
	nextEnd := g.paneStart(w) + g.slide
	nextExpiry := g.paneStart(w-g.lateness) + g.slide + g.lateness
	if g.early > 0 {
		if b := g.earlyAt(w) + g.early; b < nextEnd {
			nextEnd = b
		}
	}
	return min(nextEnd, nextExpiry)
}

// earlyAt returns the latest early result time at or before w of the window holding w: its start
// plus a multiple of the early results' period (the start itself before the first).
func (g windowing) earlyAt(w int64) int64 {
	start := g.paneStart(w)
	return start + floorDiv(w-start, g.early)*g.early
}
