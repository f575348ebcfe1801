package windowaggregator

import (
	"fmt"
	"maps"
	"time"

	"go.opentelemetry.io/collector/component"
)

// SeriesExplanation answers, for one series an operator names, what its windows hold and when each
// fires; or, when the component holds no such series, why that may be.
type SeriesExplanation struct {
	Component   string             `json:"component"`
	Aggregation string             `json:"aggregation"`
	Series      map[string]string  `json:"series"`
	Found       bool               `json:"found"`
	Windows     []SeriesWindowView `json:"windows"` // its windows that hold records and have not expired, earliest first
	// LastValues are its last windows as they were emitted since LastValuesSince, when it was first
	// asked about while held (see seriesWatch): earliest first, at most watchedWindows.
	LastValues      []EmittedWindow `json:"last_values"`
	LastValuesSince *time.Time      `json:"last_values_since"` // null: none kept (it was not held when asked about)
	Why             string          `json:"why,omitempty"`
	Records         *RecordCounts   `json:"aggregation_records,omitempty"` // the aggregation's, when the series is not found
}

// SeriesWindowView is a window of the series: what it holds so far and when it fires.
type SeriesWindowView struct {
	WindowView
	Records uint64  `json:"records"`
	Sum     float64 `json:"sum"`
}

// Explain finds the series of aggregation name, of component id, whose group_by values are values
// (every group_by key named, as text; a key left out matches a record that lacked it).
func Explain(id, name string, values map[string]string) (SeriesExplanation, error) {
	var cid component.ID
	var s *shared
	if cid.UnmarshalText([]byte(id)) == nil {
		registryMu.Lock()
		s = registry[cid]
		registryMu.Unlock()
	}
	if s == nil {
		return SeriesExplanation{}, fmt.Errorf("no window_aggregator component %q is running", id)
	}
	var a *aggregation
	for _, ag := range s.aggs {
		if ag.name == name {
			a = ag
		}
	}
	if a == nil {
		return SeriesExplanation{}, fmt.Errorf("component %q has no aggregation %q", id, name)
	}
	for k := range values {
		if !a.groupsBy(k) {
			return SeriesExplanation{}, fmt.Errorf("aggregation %q does not group by %q", name, k)
		}
	}
	ex := SeriesExplanation{Component: id, Aggregation: name, Series: values}
	e := s.engine
	key, wins, found := e.FindSeries(a.index, func(key string) bool { return maps.Equal(a.decodeKey(key), values) })
	ex.Found, ex.Windows = found, []SeriesWindowView{}
	for _, w := range wins {
		ex.Windows = append(ex.Windows, SeriesWindowView{WindowView: s.windowView(w.WindowView), Records: w.Records, Sum: w.Sum})
	}
	ex.LastValues, ex.LastValuesSince = s.watch.ask(a.index, values, key, found, time.Unix(0, e.Now()).UTC())
	if ex.LastValues == nil {
		ex.LastValues = []EmittedWindow{}
	}
	if found {
		return ex, nil
	}
	rc := s.recordCounts(a)
	ex.Records = &rc
	late := rc.LateRouted + rc.LateDropped + rc.LatePassed
	switch {
	case len(ex.LastValues) > 0:
		ex.Why = "fired: its windows have fired and taken late records until W passed their end plus allowed_lateness; its last values are listed"
	case e.Overflowing(a.index):
		ex.Why = fmt.Sprintf("overflow: the aggregation holds max_series (%d) series, and the records of a new one go to its overflow series", s.cfg.MaxSeries)
	default:
		ex.Why = fmt.Sprintf("not seen: no record with these values is in a window that has not expired. Of its signal's records, the aggregation "+
			"did not select %d (no record matched: its condition or group_by did not hold), and %d came too late for their window (late). "+
			"Its emitted values are kept once it is asked about while it has records", rc.Unmatched, late)
	}
	return ex, nil
}

// groupsBy reports whether the aggregation groups by key name.
func (a *aggregation) groupsBy(name string) bool {
	for _, k := range a.groupBy {
		if k.name == name {
			return true
		}
	}
	return false
}
