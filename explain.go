package windowaggregator

import (
	"fmt"
	"maps"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/view"
)

// Explain finds the series of aggregation name whose group_by values are values (every group_by key
// named, as text; a key left out matches a record that lacked it).
func (s *shared) Explain(name string, values map[string]string) (view.SeriesExplanation, error) {
	id := s.id.String()
	var a *ingest.Aggregation
	for _, ag := range s.Aggs {
		if ag.Name == name {
			a = ag
		}
	}
	if a == nil {
		return view.SeriesExplanation{}, fmt.Errorf("component %q has no aggregation %q", id, name)
	}
	for k := range values {
		if !a.GroupsBy(k) {
			return view.SeriesExplanation{}, fmt.Errorf("aggregation %q does not group by %q", name, k)
		}
	}
	ex := view.SeriesExplanation{Component: id, Aggregation: name, Series: values}
	e := s.Engine
	key, wins, found := e.FindSeries(a.Index, func(key string) bool { return maps.Equal(a.DecodeKey(key), values) })
	ex.Found, ex.Windows = found, []view.SeriesWindowView{}
	now := e.Now()
	for _, w := range wins {
		ex.Windows = append(ex.Windows, view.SeriesWindowView{WindowView: s.windowView(w.WindowView, now), Records: w.Records, Sum: w.Sum})
	}
	ex.LastValues, ex.LastValuesSince = s.watch.Ask(a.Index, values, key, found, time.Unix(0, now).UTC())
	if ex.LastValues == nil {
		ex.LastValues = []view.EmittedWindow{}
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
	case e.Overflowing(a.Index):
		ex.Why = fmt.Sprintf("overflow: the aggregation holds max_series (%d) series, and the records of a new one go to its overflow series", s.cfg.MaxSeries)
	default:
		ex.Why = fmt.Sprintf("not seen: no record with these values is in a window that has not expired. Of its signal's records, the aggregation "+
			"did not select %d (no record matched: its condition or group_by did not hold), and %d came too late for their window (late). "+
			"Its emitted values are kept once it is asked about while it has records", rc.Unmatched, late)
	}
	return ex, nil
}
