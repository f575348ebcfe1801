package view

import "time"

// ComponentView is one component id as an operator reads it (GET /api/v1/components).
type ComponentView struct {
	ID                  string       `json:"id"`
	Watermark           *time.Time   `json:"watermark"` // null before any record
	WallClock           time.Time    `json:"wall_clock"`
	WatermarkLagSeconds *float64     `json:"watermark_lag_seconds"`
	HeldBy              string       `json:"held_by"`
	Sources             []SourceView `json:"sources"`              // null without watermark.per_source
	SourcesTotal        int          `json:"sources_total"`        // sources held; Sources lists at most the view's top
	SourcesAtW          int          `json:"sources_at_watermark"` // sources holding W together (see SourceView.AtW), all of them
	// Windows are the component's windows that hold records of some aggregation and have not
	// expired (every aggregation has the same windows): at most the view's top, earliest first, of
	// OpenWindows.
	Windows     []WindowView `json:"windows"`
	OpenWindows int          `json:"open_windows"`
	// OverdueWindows are how many of the OpenWindows are overdue (see WindowView).
	OverdueWindows int               `json:"overdue_windows"`
	Aggregations   []AggregationView `json:"aggregations"`
	// LateRecords are the component's late records by what happened to them, each counted once
	// whatever the aggregations that judged it late.
	LateRecords LateCounts      `json:"late_records"`
	Checkpoint  *CheckpointView `json:"checkpoint"` // null without storage
	Emission    EmissionView    `json:"emission"`
	// Health is what an operator reads first (see Health); the view extension adds it from its
	// history, null elsewhere.
	Health *Health `json:"health"`
}

// LateCounts are late records (expired, future, invalid) by what happened to them: routed to the
// late pipeline, dropped, or passed on by the processor.
type LateCounts struct {
	Routed  int64 `json:"routed"`
	Dropped int64 `json:"dropped"`
	Passed  int64 `json:"passed"`
}

// Health is what the top of a component's part of the page says beyond the component's own figures
// (W's lag, what holds it, overdue windows, emission, checkpoints).
type Health struct {
	// Holder is the one source that holds W back, by its per_source values (null for none, for
	// the shared source, or when sources are tied: TiedSources of them hold W together), and
	// HolderBehindSeconds how far its watermark is behind the next source's.
	Holder              map[string]string `json:"holder"`
	HolderIsShared      bool              `json:"holder_is_shared,omitempty"`
	HolderBehindSeconds *float64          `json:"holder_behind_seconds"`
	TiedSources         int               `json:"tied_sources"`
	// Late records per second, the component's, over the view extension's last readings.
	LateRoutedPerSecond  float64 `json:"late_routed_per_second"`
	LateDroppedPerSecond float64 `json:"late_dropped_per_second"`
	LatePassedPerSecond  float64 `json:"late_passed_per_second"`
}

// SourceView is one source of the watermark with per-source tracking.
type SourceView struct {
	Source    map[string]string `json:"source"` // its watermark.per_source values; null for the shared source
	Shared    bool              `json:"shared"`
	Watermark *time.Time        `json:"watermark"`
	LastSeen  time.Time         `json:"last_seen"`
	Idle      bool              `json:"idle"`
	HoldsBack bool              `json:"holds_back"`
	// AtW: several sources are within SourcesTie of the least watermark and hold W together; none
	// of them holds_back.
	AtW bool `json:"at_watermark"`
}

// AggregationView is one aggregation: its series, its open windows and its records by outcome.
type AggregationView struct {
	Name        string       `json:"name"`
	Signal      string       `json:"signal"`
	GroupBy     []string     `json:"group_by"`
	Series      int64        `json:"series"`
	MaxSeries   int          `json:"max_series"`
	OpenWindows int          `json:"open_windows"` // the component's Windows that hold records of this aggregation
	Records     RecordCounts `json:"records"`
	// Unit is the unit of its values (sum, avg, min, max); OutputUnits each output's metric's
	// unit, by name as in the metric's name after "<name>.".
	Unit        string            `json:"unit"`
	OutputUnits map[string]string `json:"output_units"`
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
// reaches its end plus allowed_lateness. It is overdue when it has not fired and the wall clock is
// past end + max_out_of_orderness + the slide (at least OverdueGrace): W would reach its end at end
// + max_out_of_orderness if the records kept up with the clock, and records come some seconds
// behind it (an SDK's export delay, a batch processor); a window still unfired when the next one
// should fire too is held back by something (a source behind, or silence until idle_timeout).
type WindowView struct {
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	Fired          bool      `json:"fired"`
	FiresAtW       time.Time `json:"fires_at_watermark"`
	ExpiresAtW     time.Time `json:"expires_at_watermark"`
	OverdueSeconds *float64  `json:"overdue_seconds"` // by how much, past the grace; null when not overdue
}

// SourcesTie: sources whose watermarks are within it of the least hold W together. Sources that
// send together differ by a fraction of a second, which one is the least changing from batch to
// batch; none of them is the one to look at.
const SourcesTie = time.Second

// OverdueGrace is the least time past end + max_out_of_orderness a window waits for W before it is
// overdue, for slides shorter than it: W moves with the batches.
const OverdueGrace = time.Second

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
	Failing       bool   `json:"failing"`        // the last delivery failed: results are dropped or held
}

// ComponentSample is what the view's history keeps of a component id at a moment: W, its lag
// behind the wall clock, each aggregation's records by outcome since the start, and the
// component's late records.
type ComponentSample struct {
	ID                  string                  `json:"-"`
	WallClock           time.Time               `json:"wall_clock"`
	Watermark           *time.Time              `json:"watermark"`
	WatermarkLagSeconds *float64                `json:"watermark_lag_seconds"`
	Records             map[string]RecordCounts `json:"records"` // by aggregation name
	LateRecords         LateCounts              `json:"late_records"`
}

// SeriesExplanation answers, for one series an operator names, what its windows hold and when each
// fires; or, when the component holds no such series, why that may be.
type SeriesExplanation struct {
	Component   string             `json:"component"`
	Aggregation string             `json:"aggregation"`
	Series      map[string]string  `json:"series"`
	Found       bool               `json:"found"`
	Windows     []SeriesWindowView `json:"windows"` // its windows that hold records and have not expired, earliest first
	// LastValues are its last windows as they were emitted since LastValuesSince, when it was first
	// asked about while held (see Watch): earliest first, at most watchedWindows.
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

// EmittedWindow is a window of a series as it was emitted: its records and sum, with its late
// firings added, and the whole window's average, minimum and maximum (null without a finite value).
type EmittedWindow struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Records     uint64    `json:"records"`
	Sum         float64   `json:"sum"`
	Avg         *float64  `json:"avg"`
	Min         *float64  `json:"min"`
	Max         *float64  `json:"max"`
	LateFirings int       `json:"late_firings"` // firings after the first, each with the late records it took
	// Outputs are the aggregation's gauges of the window (percentiles, spread, distinct values,
	// rate...), by output name as in their metrics' names, corrected by late firings.
	Outputs map[string]float64 `json:"outputs,omitempty"`
}
