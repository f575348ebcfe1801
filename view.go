package windowaggregator

import (
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// The operator's view (issue 34, in progress): what the window_aggregator_view extension serves, read
// from each running component id's state. Reading it copies figures: it takes no lock of the ingest
// path for longer than a copy (see stream.Engine.Sources and OpenWindows).

// ComponentView is one component id as an operator reads it (GET /api/v1/components).
type ComponentView struct {
	ID                  string            `json:"id"`
	Watermark           *time.Time        `json:"watermark"` // null before any record
	WallClock           time.Time         `json:"wall_clock"`
	WatermarkLagSeconds *float64          `json:"watermark_lag_seconds"`
	HeldBy              string            `json:"held_by"`
	Sources             []SourceView      `json:"sources"`       // null without watermark.per_source
	SourcesTotal        int               `json:"sources_total"` // sources held; Sources lists at most the view's top
	Aggregations        []AggregationView `json:"aggregations"`
	Checkpoint          *CheckpointView   `json:"checkpoint"` // null without storage
	Emission            EmissionView      `json:"emission"`
}

// SourceView is one source of the watermark with per-source tracking.
type SourceView struct {
	Source    map[string]string `json:"source"` // its watermark.per_source values; null for the shared source
	Shared    bool              `json:"shared"`
	Watermark *time.Time        `json:"watermark"`
	LastSeen  time.Time         `json:"last_seen"`
	Idle      bool              `json:"idle"`
	HoldsBack bool              `json:"holds_back"`
}

// AggregationView is one aggregation: its series, its open windows and its records by outcome.
type AggregationView struct {
	Name        string       `json:"name"`
	Signal      string       `json:"signal"`
	GroupBy     []string     `json:"group_by"`
	Series      int64        `json:"series"`
	MaxSeries   int          `json:"max_series"`
	OpenWindows int          `json:"open_windows"`
	Windows     []WindowView `json:"windows"` // at most the view's top, earliest first
	Records     RecordCounts `json:"records"`
	// TopSeries are the series with the most records in the last window W has closed, which ended
	// at LastWindowEnd, or, once that window has expired, in the next window to fire
	// (LastWindowFired false): at most the view's top, most first.
	TopSeries       []SeriesRecords `json:"top_series"`
	LastWindowEnd   *time.Time      `json:"last_window_end"`
	LastWindowFired bool            `json:"last_window_fired"`
	OverflowRecords *int64          `json:"overflow_records"` // the component's, all aggregations together
}

// SeriesRecords is a series, by its group_by values, and its records in a window. Overflow marks
// the aggregation's overflow series, which takes the records of new series past max_series.
type SeriesRecords struct {
	Series   map[string]string `json:"series"`
	Records  uint64            `json:"records"`
	Overflow bool              `json:"overflow,omitempty"`
}

// WindowView is an open window: it fires when W reaches its end, and takes late records until W
// reaches its end plus allowed_lateness.
type WindowView struct {
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Fired      bool      `json:"fired"`
	FiresAtW   time.Time `json:"fires_at_watermark"`
	ExpiresAtW time.Time `json:"expires_at_watermark"`
}

// RecordCounts are an aggregation's records by outcome since the component started: on time, late
// updates (late_accepted), late data (expired, future or invalid) routed to the late pipeline,
// dropped, or passed on by the processor, duplicates (at the first aggregation that selects them),
// and records of its signal it does not select.
type RecordCounts struct {
	OnTime       uint64 `json:"on_time"`
	LateAccepted uint64 `json:"late_accepted"`
	LateRouted   int64  `json:"late_routed"`
	LateDropped  int64  `json:"late_dropped"`
	LatePassed   int64  `json:"late_passed"`
	Duplicate    int64  `json:"duplicate"`
	Unmatched    int64  `json:"unmatched"`
}

// CheckpointView is the state of checkpoints, with storage.
type CheckpointView struct {
	Last  *time.Time `json:"last"`  // the last save that succeeded; null for none
	Bytes int        `json:"bytes"` // its size
	Error string     `json:"error"` // the error of a failure since, "" for none
}

// EmissionView is the state of the delivery of results.
type EmissionView struct {
	QueuedPoints  int    `json:"queued_points"`
	DroppedPoints int64  `json:"dropped_points"` // since the start
	LastError     string `json:"last_error"`     // the last delivery error, "" for none
}

// Views returns every running window_aggregator component id of this process, by id, with at most
// top sources and windows each.
func Views(top int) []ComponentView {
	states := running()
	views := make([]ComponentView, 0, len(states))
	for _, s := range states {
		views = append(views, s.view(top))
	}
	return views
}

// ComponentSample is what the view's history keeps of a component id at a moment: W, its lag
// behind the wall clock, and each aggregation's records by outcome since the start.
type ComponentSample struct {
	ID                  string         `json:"-"`
	WallClock           time.Time      `json:"wall_clock"`
	Watermark           *time.Time     `json:"watermark"`
	WatermarkLagSeconds *float64       `json:"watermark_lag_seconds"`
	Records             []RecordCounts `json:"records"` // by aggregation, in the order of ComponentView.Aggregations
}

// Samples returns a ComponentSample of every running window_aggregator component id, by id: a
// reading cheaper than Views, for a history taken every second. It also forgets the series that the
// explainer was not asked about for a while.
func Samples() []ComponentSample {
	states := running()
	out := make([]ComponentSample, 0, len(states))
	for _, s := range states {
		now := s.engine.Now()
		s.watch.forgetStale(time.Unix(0, now))
		c := ComponentSample{ID: s.id.String(), WallClock: time.Unix(0, now).UTC(), Records: make([]RecordCounts, len(s.aggs))}
		c.Watermark, c.WatermarkLagSeconds = watermarkAt(s.engine.Watermark(), now)
		for i, a := range s.aggs {
			c.Records[i] = s.recordCounts(a)
		}
		out = append(out, c)
	}
	return out
}

// running returns the component ids that have started, by id.
func running() []*shared {
	registryMu.Lock()
	states := make([]*shared, 0, len(registry))
	for _, s := range registry {
		states = append(states, s)
	}
	registryMu.Unlock()
	states = slices.DeleteFunc(states, func(s *shared) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.started
	})
	slices.SortFunc(states, func(a, b *shared) int { return strings.Compare(a.id.String(), b.id.String()) })
	return states
}

// view reads the component id's figures.
func (s *shared) view(top int) ComponentView {
	e := s.engine
	now := e.Now()
	st := e.Stats()
	v := ComponentView{ID: s.id.String(), WallClock: time.Unix(0, now).UTC(), HeldBy: st.HeldBy.String(),
		Emission: EmissionView{QueuedPoints: s.emitter.Pending()}}
	v.Emission.DroppedPoints, v.Emission.LastError = s.emitter.Dropped()
	if c := s.storage; c != nil {
		v.Checkpoint = &CheckpointView{}
		if last := c.last.Load(); last != nil {
			if !last.savedAt.IsZero() {
				t := last.savedAt.UTC()
				v.Checkpoint.Last, v.Checkpoint.Bytes = &t, last.bytes
			}
			if last.failedAt.After(last.savedAt) {
				v.Checkpoint.Error = last.err
			}
		}
	}
	v.Watermark, v.WatermarkLagSeconds = watermarkAt(st.Watermark, now)
	if keys := s.cfg.Watermark.PerSource; len(keys) > 0 {
		srcs, total := e.Sources(top)
		v.Sources, v.SourcesTotal = make([]SourceView, 0, len(srcs)), total
		for _, sv := range srcs {
			out := SourceView{Shared: sv.Shared, LastSeen: time.Unix(0, sv.LastHeard).UTC(), Idle: sv.Idle, HoldsBack: sv.HoldsBack}
			if !sv.Shared {
				out.Source = decodeSourceKey(keys, sv.Key)
			}
			if sv.HasWatermark {
				t := time.Unix(0, sv.Watermark).UTC()
				out.Watermark = &t
			}
			v.Sources = append(v.Sources, out)
		}
	}
	overflow := int64(st.OverflowRecords)
	for _, a := range s.aggs {
		wins, open := e.OpenWindows(a.index, top)
		av := AggregationView{Name: a.name, Signal: a.signal.name, GroupBy: a.groupByNames(), Series: st.ActiveSeries[a.index], MaxSeries: s.cfg.MaxSeries,
			OpenWindows: open, OverflowRecords: &overflow, Records: s.recordCounts(a)}
		heavy, end := e.TopSeries(a.index, top)
		if end != 0 {
			t := time.Unix(0, end).UTC()
			av.LastWindowEnd, av.LastWindowFired = &t, st.Watermark >= end
		}
		for _, sc := range heavy {
			av.TopSeries = append(av.TopSeries, SeriesRecords{Series: a.decodeKey(sc.Key), Records: sc.Records, Overflow: sc.Overflow})
		}
		for _, wv := range wins {
			av.Windows = append(av.Windows, s.windowView(wv))
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

// windowView is the engine's window as the view shows it: it fires when W reaches its end and takes
// late records until W reaches its end plus allowed_lateness.
func (s *shared) windowView(w stream.WindowView) WindowView {
	end := time.Unix(0, w.End).UTC()
	return WindowView{Start: time.Unix(0, w.Start).UTC(), End: end, Fired: w.Fired, FiresAtW: end,
		ExpiresAtW: time.Unix(0, w.End+int64(s.cfg.AllowedLateness)).UTC()}
}

// recordCounts are aggregation a's records by outcome since the start.
func (s *shared) recordCounts(a *aggregation) RecordCounts {
	on, late, _ := s.engine.Verdicts(a.index)
	c := &s.byAgg[a.index]
	return RecordCounts{OnTime: on, LateAccepted: late, LateRouted: c.late[lateRouted].Load(), LateDropped: c.late[lateDropped].Load(),
		LatePassed: c.late[latePassed].Load(), Duplicate: c.duplicate.Load(), Unmatched: c.unmatched.Load()}
}

// decodeSourceKey reads a source key as setSource writes it: each per_source value, its length first.
func decodeSourceKey(keys []string, b []byte) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		n, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < n {
			return out
		}
		out[k] = string(b[m : m+int(n)])
		b = b[m+int(n):]
	}
	return out
}

// decodeKey reads a series key as the aggregation's group_by values, each as text; a key the
// record lacked is left out.
func (a *aggregation) decodeKey(key string) map[string]string {
	out := make(map[string]string, len(a.groupBy))
	_ = serieskey.Decode(key, func(i int, v serieskey.Value) {
		if i >= len(a.groupBy) {
			return
		}
		name := a.groupBy[i].name
		switch v.Kind {
		case serieskey.Str, serieskey.Bytes:
			out[name] = v.Str
		case serieskey.Int:
			out[name] = strconv.FormatInt(v.Int, 10)
		case serieskey.Double:
			out[name] = strconv.FormatFloat(v.Double, 'g', -1, 64)
		case serieskey.Bool:
			out[name] = strconv.FormatBool(v.Bool)
		}
	})
	return out
}

// groupByNames are the aggregation's group_by keys.
func (a *aggregation) groupByNames() []string {
	names := make([]string, len(a.groupBy))
	for i, k := range a.groupBy {
		names[i] = k.name
	}
	return names
}
