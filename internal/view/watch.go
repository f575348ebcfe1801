package view

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// The last values of the series an operator asks about in the view's explainer. The component keeps
// no values once a window has fired and expired; asking about a series makes it keep that series'
// next ones: at most maxWatched series per component id, the last watchedWindows windows of each,
// until nobody has asked about it for watchFor. With no series asked about, a fired result costs one
// atomic load; with some, a comparison of keys for each.
const (
	maxWatched     = 16
	watchedWindows = 12
	watchFor       = 10 * time.Minute
)

// Watch holds the series asked about, for one component id.
type Watch struct {
	// Gauges names the gauges of the whole window that a firing carries (see EmittedWindow.Outputs);
	// nil: none are kept. Set before the first Observe.
	Gauges func(r *stream.Result, put func(name string, v float64))

	active atomic.Bool // series is not empty
	mu     sync.Mutex
	series []*watchedSeries
}

type watchedSeries struct {
	agg    int
	values map[string]string
	key    string    // the series key
	since  time.Time // when it was first asked about
	asked  time.Time // when it was last asked about
	last   []EmittedWindow
}

// Ask says at wall time now that series values of aggregation agg, whose key is key, is wanted, and
// returns what is kept of it and since when (nil: nothing). A series is kept only when asked about
// while it is held (found), so that its key is known and a result is matched by comparing keys.
// Series not asked about for watchFor are forgotten; past maxWatched the one asked about longest ago
// gives way.
func (w *Watch) Ask(agg int, values map[string]string, key string, found bool, now time.Time) (last []EmittedWindow, since *time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forget(now)
	var s *watchedSeries
	for _, ws := range w.series {
		if ws.agg == agg && maps.Equal(ws.values, values) {
			s = ws
		}
	}
	if s == nil {
		if !found {
			return nil, nil
		}
		if len(w.series) == maxWatched {
			oldest := 0
			for i, ws := range w.series {
				if ws.asked.Before(w.series[oldest].asked) {
					oldest = i
				}
			}
			w.series = slices.Delete(w.series, oldest, oldest+1)
		}
		s = &watchedSeries{agg: agg, values: maps.Clone(values), key: key, since: now}
		w.series = append(w.series, s)
		w.active.Store(true)
	}
	s.asked = now
	t := s.since
	return slices.Clone(s.last), &t
}

// forget drops the series nobody asked about for watchFor before now (under mu).
func (w *Watch) forget(now time.Time) {
	w.series = slices.DeleteFunc(w.series, func(ws *watchedSeries) bool { return now.Sub(ws.asked) > watchFor })
	w.active.Store(len(w.series) > 0)
}

// ForgetStale is forget for a reader that holds no lock.
func (w *Watch) ForgetStale(now time.Time) {
	if !w.active.Load() {
		return
	}
	w.mu.Lock()
	w.forget(now)
	w.mu.Unlock()
}

// Observe keeps r's values if its series is asked about.
func (w *Watch) Observe(r *stream.Result) {
	if !w.active.Load() || !r.HasWindow || r.Overflow || r.Early {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ws := range w.series {
		if ws.agg == r.Agg && ws.key == r.Key {
			ws.add(r, w.Gauges)
		}
	}
}

// add takes a firing of the series: a late one adds to its window's entry. Entries are by window
// end, which is a window's own for a given size.
func (ws *watchedSeries) add(r *stream.Result, gauges func(*stream.Result, func(string, float64))) {
	end := time.Unix(0, r.End).UTC()
	i, kept := slices.BinarySearchFunc(ws.last, end, func(e EmittedWindow, t time.Time) int { return e.End.Compare(t) })
	switch {
	case kept:
		ws.last[i].LateFirings++
	case len(ws.last) < watchedWindows:
		ws.last = slices.Insert(ws.last, i, EmittedWindow{Start: time.Unix(0, r.Start).UTC(), End: end})
	case i == 0:
		return // older than every window kept
	default:
		ws.last = slices.Insert(slices.Delete(ws.last, 0, 1), i-1, EmittedWindow{Start: time.Unix(0, r.Start).UTC(), End: end})
		i--
	}
	e := &ws.last[i]
	e.Records += r.Count
	e.Sum += r.Sum
	if r.WindowValueCount > 0 {
		avg, lo, hi := r.Avg, r.Min, r.Max
		e.Avg, e.Min, e.Max = &avg, &lo, &hi
	}
	if gauges != nil {
		gauges(r, func(name string, v float64) {
			if e.Outputs == nil {
				e.Outputs = map[string]float64{}
			}
			e.Outputs[name] = v // a late firing's, corrected, replaces the first's
		})
	}
}
