package windowaggregator

import (
	"math"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The operator's view: each running component id is a view.Source (registered in start,
// unregistered when its last instance shuts down); these methods read its state for the
// window_aggregator_view extension. Reading it copies figures: it takes no lock of the ingest path for
// longer than a copy (see stream.Engine.Sources and OpenWindows).

// ID is the component id.
func (s *shared) ID() string { return s.id.String() }

// Sample reads what the view's history keeps; it also forgets the series that the explainer was not
// asked about for a while.
func (s *shared) Sample() view.ComponentSample {
	now := s.Engine.Now()
	s.watch.ForgetStale(time.Unix(0, now))
	c := view.ComponentSample{ID: s.id.String(), WallClock: time.Unix(0, now).UTC(), Records: make(map[string]view.RecordCounts, len(s.Aggs)),
		LateRecords: s.lateCounts()}
	c.Watermark, c.WatermarkLagSeconds = watermarkAt(s.Engine.Watermark(), now)
	for _, a := range s.Aggs {
		c.Records[a.Name] = s.recordCounts(a)
	}
	return c
}

// View reads the component id's figures.
func (s *shared) View(top int) view.ComponentView {
	e := s.Engine
	now := e.Now()
	st := e.Stats()
	v := view.ComponentView{ID: s.id.String(), WallClock: time.Unix(0, now).UTC(), HeldBy: st.HeldBy.String(),
		LateRecords: s.lateCounts(), Emission: view.EmissionView{QueuedPoints: s.emitter.Pending()}}
	v.Emission.DroppedPoints, v.Emission.LastError = s.emitter.Dropped()
	v.Emission.Failing = s.emitter.Failing()
	if c := s.storage; c != nil {
		v.Checkpoint = &view.CheckpointView{}
		if last := c.Last(); last != nil {
			if !last.SavedAt.IsZero() {
				t := last.SavedAt.UTC()
				v.Checkpoint.Last, v.Checkpoint.Bytes = &t, last.Bytes
			}
			if last.FailedAt.After(last.SavedAt) {
				v.Checkpoint.Error = last.Err
			}
		}
	}
	v.Watermark, v.WatermarkLagSeconds = watermarkAt(st.Watermark, now)
	if keys := s.cfg.Watermark.PerSource; len(keys) > 0 {
		srcs, total, atW := e.Sources(top, int64(view.SourcesTie))
		v.Sources, v.SourcesTotal, v.SourcesAtW = make([]view.SourceView, 0, len(srcs)), total, atW
		for _, sv := range srcs {
			out := view.SourceView{Shared: sv.Shared, LastSeen: time.Unix(0, sv.LastHeard).UTC(), Idle: sv.Idle, HoldsBack: sv.HoldsBack, AtW: sv.AtW}
			if !sv.Shared {
				out.Source = ingest.DecodeSourceKey(keys, sv.Key)
			}
			if sv.HasWatermark {
				t := time.Unix(0, sv.Watermark).UTC()
				out.Watermark = &t
			}
			v.Sources = append(v.Sources, out)
		}
	}
	wins, open, openByAgg := e.OpenWindows(math.MaxInt)
	v.OpenWindows = open
	for i, wv := range wins {
		w := s.windowView(wv, now)
		if w.OverdueSeconds != nil {
			v.OverdueWindows++
		}
		if i < top {
			v.Windows = append(v.Windows, w)
		}
	}
	overflow := int64(st.OverflowRecords)
	for _, a := range s.Aggs {
		av := view.AggregationView{Name: a.Name, Signal: a.Signal.Name, GroupBy: a.GroupByNames(), Series: st.ActiveSeries[a.Index], MaxSeries: s.cfg.MaxSeries,
			OpenWindows: openByAgg[a.Index], OverflowRecords: &overflow, Records: s.recordCounts(a), OutputUnits: map[string]string{}}
		av.Unit = s.described[a.Index].Unit()
		s.described[a.Index].Units(func(name, unit string) { av.OutputUnits[name] = unit })
		heavy, end := e.TopSeries(a.Index, top)
		if end != 0 {
			t := time.Unix(0, end).UTC()
			av.LastWindowEnd, av.LastWindowFired = &t, st.Watermark >= end
		}
		for _, sc := range heavy {
			av.TopSeries = append(av.TopSeries, view.SeriesRecords{Series: a.DecodeKey(sc.Key), Records: sc.Records, Overflow: sc.Overflow})
		}
		v.Aggregations = append(v.Aggregations, av)
	}
	return v
}

// watermarkAt is W, Unix ns, and its lag behind the wall clock at now, as the view shows them: null
// before any record.
func watermarkAt(w, now int64) (*time.Time, *float64) {
	if w <= 0 {
		return nil, nil
	}
	t, lag := time.Unix(0, w).UTC(), float64(now-w)/1e9
	return &t, &lag
}

// windowView is the engine's window as the view shows it at the wall clock's now: it fires when W
// reaches its end and takes late records until W reaches its end plus allowed_lateness; it is
// overdue once now passes its end + max_out_of_orderness + the slide (at least view.OverdueGrace)
// unfired (see view.WindowView).
func (s *shared) windowView(w stream.WindowView, now int64) view.WindowView {
	end := time.Unix(0, w.End).UTC()
	v := view.WindowView{Start: time.Unix(0, w.Start).UTC(), End: end, Fired: w.Fired, FiresAtW: end,
		ExpiresAtW: time.Unix(0, w.End+int64(s.cfg.AllowedLateness)).UTC()}
	grace := max(s.cfg.Window.slide(), view.OverdueGrace)
	if by := now - (w.End + int64(s.cfg.Watermark.MaxOutOfOrderness) + int64(grace)); !w.Fired && by > 0 {
		secs := float64(by) / 1e9
		v.OverdueSeconds = &secs
	}
	return v
}

// lateCounts are the component's late records by what happened to them.
func (s *shared) lateCounts() view.LateCounts {
	r := &s.Reporter
	return view.LateCounts{Routed: r.Late[ingest.LateRouted].Load(), Dropped: r.Late[ingest.LateDropped].Load(), Passed: r.Late[ingest.LatePassed].Load()}
}

// recordCounts are aggregation a's records by outcome since the start.
func (s *shared) recordCounts(a *ingest.Aggregation) view.RecordCounts {
	on, late, _ := s.Engine.Verdicts(a.Index)
	c := &s.ByAgg[a.Index]
	return view.RecordCounts{OnTime: on, LateAccepted: late, LateRouted: c.Late[ingest.LateRouted].Load(), LateDropped: c.Late[ingest.LateDropped].Load(),
		LatePassed: c.Late[ingest.LatePassed].Load(), Duplicate: c.Duplicate.Load(), Unmatched: c.Unmatched.Load()}
}
