package windowaggregator

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// Config is the configuration of both forms of window_aggregator. The keys are those of the contract
// (../shared/design/contract.md), plus the emission and checkpoint settings documented in the README.
type Config struct {
	Window          WindowConfig    `mapstructure:"window"`
	Watermark       WatermarkConfig `mapstructure:"watermark"`
	AllowedLateness time.Duration   `mapstructure:"allowed_lateness"`
	LateData        LateDataConfig  `mapstructure:"late_data"`
	// Temporality of count, sum and histogram: cumulative (running totals per series) or delta (the
	// records of one slide per point).
	Temporality Temporality `mapstructure:"temporality"`
	// LateFirings: fold puts what late records add into the series' next point; revise (delta only)
	// re-emits the window's slide with the late records alone.
	LateFirings LateFirings `mapstructure:"late_firings"`
	// SeriesExpiration ends a cumulative series after this much event time without records.
	SeriesExpiration time.Duration `mapstructure:"series_expiration"`
	MaxSeries        int           `mapstructure:"max_series"`
	// MaxInputStreams bounds, per metrics aggregation, the input streams whose last point it keeps
	// (for the increases of cumulative inputs); past it a new stream's points are counted and left
	// out.
	MaxInputStreams int `mapstructure:"max_input_streams"`
	// DropAggregatedInput (processor only) removes from the pipeline the metric points that a
	// metrics aggregation took, instead of passing them on.
	DropAggregatedInput bool          `mapstructure:"drop_aggregated_input"`
	Storage             *component.ID `mapstructure:"storage"`
	// ErrorMode says what an OTTL error on a record does: ignore (the default) and silent take the
	// condition as false, the key or the value as missing, and count it (ignore also logs it, at a
	// bounded rate); propagate refuses the batch with the error.
	ErrorMode    ottl.ErrorMode      `mapstructure:"error_mode"`
	Aggregations []AggregationConfig `mapstructure:"aggregations"`
	Emit         EmitConfig          `mapstructure:"emit"`
	Checkpoint   CheckpointConfig    `mapstructure:"checkpoint"`
	// Dedup recognises a record that arrives again (a retry, a replay) and counts it once.
	Dedup DedupConfig `mapstructure:"dedup"`

	// ottl is what Validate parsed of the aggregations' OTTL, for the component to compile them with
	// (see parsers); not a setting.
	ottl *ingest.OTTLParsers

	// prevent unkeyed literal initialization
	_ struct{}
}

// WindowConfig is the window geometry.
type WindowConfig struct {
	Size  time.Duration `mapstructure:"size"`
	Slide time.Duration `mapstructure:"slide"` // 0: size (tumbling)
	// Offset moves the windows' starts: offset + k × slide from the Unix epoch (|offset| < slide),
	// as in daily windows at a local midnight.
	Offset time.Duration `mapstructure:"offset"`
	// EarlyResults, for tumbling windows: each time W passes another early_results past a window's
	// start, the results of the window so far (0: none).
	EarlyResults time.Duration `mapstructure:"early_results"`
}

// slide is the windows' slide: Slide, or Size for tumbling windows.
func (w WindowConfig) slide() time.Duration {
	if w.Slide == 0 {
		return w.Size
	}
	return w.Slide
}

// WatermarkConfig says how the watermark follows the records' event times.
type WatermarkConfig struct {
	MaxOutOfOrderness time.Duration `mapstructure:"max_out_of_orderness"`
	IdleTimeout       time.Duration `mapstructure:"idle_timeout"`
	MaxFutureSkew     time.Duration `mapstructure:"max_future_skew"`
	// PerSource names the resource attributes whose values identify a record's source; each source
	// then has a watermark of its own, and W is the least of those heard from recently.
	PerSource []string `mapstructure:"per_source"`
	// SourceIdleTimeout is how long (wall clock) a source may be silent and still hold W back.
	SourceIdleTimeout time.Duration `mapstructure:"source_idle_timeout"`
	// MaxSources bounds the sources held; past it, further sources share one.
	MaxSources int `mapstructure:"max_sources"`
}

// LateDataConfig says what happens to records that come too late, too early, or without a timestamp.
type LateDataConfig struct {
	Action LateAction `mapstructure:"action"` // route | drop
}

// EmitConfig governs how results leave the component (not in the contract: documented extras).
type EmitConfig struct {
	// Interval is the ticker that applies the idle rule and sends late firings and retries.
	Interval time.Duration `mapstructure:"interval"`
	// MaxPendingPoints bounds the result data points queued for delivery (while the metrics
	// consumer fails or a checkpoint is due); past it the oldest are dropped.
	MaxPendingPoints int `mapstructure:"max_pending_points"`
	// MaxPointsPerSend bounds the data points of one request to the metrics consumer: a backlog goes
	// out in requests of at most this many.
	MaxPointsPerSend int `mapstructure:"max_points_per_send"`
}

// CheckpointConfig governs the periodic checkpoint to `storage` (not in the contract).
type CheckpointConfig struct {
	Interval time.Duration `mapstructure:"interval"` // 0: only on shutdown
}

// DedupConfig: with Enabled, a record whose identity the component has seen, while it is remembered,
// is a duplicate: no aggregation takes it. MaxIDs bounds the identities remembered at once, all
// signals together; Logs says what identifies a log record (without it, logs are not deduplicated).
type DedupConfig struct {
	Enabled bool             `mapstructure:"enabled"`
	MaxIDs  int              `mapstructure:"max_ids"`
	Logs    *DedupLogsConfig `mapstructure:"logs"`
}

// DedupLogsConfig lists the parts of a log record that, hashed together, are its identity.
type DedupLogsConfig struct {
	Key []LogPart `mapstructure:"key"`
}

// AggregationConfig is one aggregation.
type AggregationConfig struct {
	Name   string       `mapstructure:"name"`
	Signal SignalName   `mapstructure:"signal"`
	Where  *WhereConfig `mapstructure:"where"`
	// GroupBy are the series' dimensions: a key, as in service.name, or {key, default} or
	// {key, ottl}.
	GroupBy []GroupByKey `mapstructure:"group_by"`
	// Value is what the value outputs measure: duration, attribute:<key>, or {ottl: <expression>}.
	Value ValueConfig `mapstructure:"value"`
	Unit  Unit        `mapstructure:"unit"`
	// Weight is what a record stands for: adjusted_count (spans' default: the sampling's adjusted
	// count, from the span's tracestate), none (logs' default: 1), or attribute:<key>.
	Weight  Weight   `mapstructure:"weight"`
	Outputs []string `mapstructure:"outputs"`
	// Histogram says what the histogram output is: exponential (the default) or explicit buckets.
	Histogram *HistogramConfig `mapstructure:"histogram"`
	// Exemplars attaches spans to the histogram points and the max gauge (spans only).
	Exemplars ExemplarsConfig `mapstructure:"exemplars"`
}

// ExemplarsConfig: with Enabled, each histogram data point carries up to MaxPerDataPoint of the spans
// counted in it (0: 5), the one with the greatest value among them, and the max gauge the span with
// the window's greatest value.
type ExemplarsConfig struct {
	Enabled         bool `mapstructure:"enabled"`
	MaxPerDataPoint int  `mapstructure:"max_per_data_point"`
}

// defaultExemplars is max_per_data_point's default, span_metrics' too.
const defaultExemplars = 5

// perPoint is the exemplars a histogram data point carries; 0: none.
func (e ExemplarsConfig) perPoint() int {
	switch {
	case !e.Enabled:
		return 0
	case e.MaxPerDataPoint == 0:
		return defaultExemplars
	}
	return e.MaxPerDataPoint
}

// HistogramConfig is one of its two forms.
type HistogramConfig struct {
	Exponential *ExponentialHistogramConfig `mapstructure:"exponential"`
	Explicit    *ExplicitHistogramConfig    `mapstructure:"explicit"`
}

// ExponentialHistogramConfig: the output is downscaled to the finest scale at which each sign's
// buckets fit in MaxSize, as an OpenTelemetry SDK does with its max_size (0: 160). Percentiles come
// from the full sketch regardless.
type ExponentialHistogramConfig struct {
	MaxSize int `mapstructure:"max_size"`
}

// ExplicitHistogramConfig lists the buckets' upper bounds, ascending: durations (as in 5ms) for
// value: duration, numbers for attribute values. Bucket counts are exact.
type ExplicitHistogramConfig struct {
	Buckets []any `mapstructure:"buckets"`
}

// defaultHistogramMaxSize is the OpenTelemetry SDK's default max_size for exponential histograms, and
// span_metrics' default.
const defaultHistogramMaxSize = 160

// maxHistogramMaxSize is the sketch's own bucket limit per sign: a larger output cannot be finer.
// minHistogramMaxSize is the OpenTelemetry SDK's least max_size: values on both sides of 1 stay in
// two buckets at every scale.
const (
	maxHistogramMaxSize = 4096
	minHistogramMaxSize = 2
)

// WhereConfig selects the records an aggregation counts: every clause must hold.
type WhereConfig struct {
	SpanKind   []string       `mapstructure:"span_kind"`
	Attributes map[string]any `mapstructure:"attributes"`
	// Conditions are OTTL conditions, with path context names (span., log., datapoint., metric.,
	// resource., scope.): a record is selected if any of them is true.
	Conditions []string `mapstructure:"conditions"`
	// MetricNames are the metrics whose data points a metrics aggregation takes (required there).
	MetricNames []string `mapstructure:"metric_names"`
}

// GroupByKey is one dimension of an aggregation's series: the value of Key on the record (its
// attributes, its scope's, its resource's, or a special key of its signal), or of OTTL, an expression
// computed from the record; Default stands in for a value the record lacks. In YAML a plain key is
// written as a string.
type GroupByKey struct {
	Key     string `mapstructure:"key"`
	Default any    `mapstructure:"default"`
	OTTL    string `mapstructure:"ottl"`
}

// UnmarshalText takes the plain form, a key.
func (g *GroupByKey) UnmarshalText(text []byte) error {
	*g = GroupByKey{Key: string(text)}
	return nil
}

// ValueConfig is an aggregation's value: Source, written as a string (duration, attribute:<key>), or
// OTTL, an expression ({ottl: ...}).
type ValueConfig struct {
	Source string `mapstructure:"-"`
	OTTL   string `mapstructure:"ottl"`
}

// UnmarshalText takes the plain form, duration or attribute:<key>.
func (v *ValueConfig) UnmarshalText(text []byte) error {
	*v = ValueConfig{Source: string(text)}
	return nil
}

const valueDuration = "duration"

var (
	// spanKindByConfig are the values of where.span_kind.
	spanKindByConfig = map[string]ptrace.SpanKind{
		"unspecified": ptrace.SpanKindUnspecified, "internal": ptrace.SpanKindInternal, "server": ptrace.SpanKindServer,
		"client": ptrace.SpanKindClient, "producer": ptrace.SpanKindProducer, "consumer": ptrace.SpanKindConsumer,
	}
)

// maxDuration bounds every duration so that the engine's time arithmetic cannot overflow.
const maxDuration = 365 * 24 * time.Hour

func createDefaultConfig() component.Config {
	return &Config{
		Watermark:   WatermarkConfig{MaxFutureSkew: 5 * time.Minute, SourceIdleTimeout: time.Minute, MaxSources: 1000},
		LateData:    LateDataConfig{Action: actionRoute},
		ErrorMode:   ottl.IgnoreError,
		Temporality: temporalityCumulative, LateFirings: lateFold, SeriesExpiration: 5 * time.Minute,
		MaxSeries: 10000, MaxInputStreams: 100000,
		Emit:       EmitConfig{Interval: time.Second, MaxPendingPoints: 100000, MaxPointsPerSend: 2000},
		Checkpoint: CheckpointConfig{Interval: 30 * time.Second},
		Dedup:      DedupConfig{Enabled: true, MaxIDs: 5_000_000},
	}
}

// parsers returns the OTTL parsers of the configuration: those Validate parsed its expressions with,
// else new ones with telemetry set.
func (c *Config) parsers(set component.TelemetrySettings) *ingest.OTTLParsers {
	if c.ottl == nil {
		c.ottl = ingest.NewOTTLParsers(set)
	}
	return c.ottl
}

// sameSettings reports whether c and o hold the same settings, whatever each has parsed.
func (c *Config) sameSettings(o *Config) bool {
	x, y := *c, *o
	x.ottl, y.ottl = nil, nil
	return reflect.DeepEqual(x, y)
}

// bucketBounds returns the explicit buckets' upper bounds as values of the aggregation: durations
// divided by scale (nanoseconds per unit), numbers as they are.
func (a *AggregationConfig) bucketBounds(scale float64) ([]float64, error) {
	raw := a.Histogram.Explicit.Buckets
	if len(raw) == 0 {
		return nil, errors.New("at least one bucket bound is required")
	}
	bounds := make([]float64, len(raw))
	for i, b := range raw {
		if a.isDuration() {
			s, ok := b.(string)
			d, err := time.ParseDuration(s)
			if !ok || err != nil {
				return nil, fmt.Errorf("value: duration takes durations, as in 5ms; got %v", b)
			}
			bounds[i] = float64(d) / scale
		} else {
			switch v := b.(type) {
			case int:
				bounds[i] = float64(v)
			case int64:
				bounds[i] = float64(v)
			case uint64:
				bounds[i] = float64(v)
			case float64:
				bounds[i] = v
			default:
				return nil, fmt.Errorf("attribute values take numbers; got %v", b)
			}
			if math.IsNaN(bounds[i]) || math.IsInf(bounds[i], 0) {
				return nil, fmt.Errorf("bounds must be finite; got %v", b)
			}
		}
		if i > 0 && bounds[i] <= bounds[i-1] {
			return nil, fmt.Errorf("bounds must be ascending; %v comes after %v", b, raw[i-1])
		}
	}
	return bounds, nil
}

// weight returns the aggregation's weight setting, its default filled in: adjusted_count for spans,
// none for logs.
func (a *AggregationConfig) weight() Weight {
	if a.Weight != "" {
		return a.Weight
	}
	if sg := ingest.SignalNamed(string(a.Signal)); sg != nil && sg.AdjustedCount {
		return weightAdjustedCountName
	}
	return weightNoneName
}

// isDuration reports whether the aggregation's value is the span duration.
func (a *AggregationConfig) isDuration() bool {
	if a.Value == (ValueConfig{}) {
		sg := ingest.SignalNamed(string(a.Signal))
		return sg != nil && sg.Duration // spans' default
	}
	return a.Value.Source == valueDuration
}

// outputs returns the configured outputs, or the default [count].
func (a *AggregationConfig) outputs() []string {
	if len(a.Outputs) == 0 {
		return []string{delivery.Count}
	}
	return a.Outputs
}
