package stream

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Config is the engine's configuration. Durations are those of the component's config.
type Config struct {
	Size  time.Duration
	Slide time.Duration // 0 means Size (tumbling)
	// Offset moves the windows' starts to Offset + k × slide from the epoch; |Offset| < slide.
	Offset time.Duration
	// EarlyResults, for tumbling windows (0 < EarlyResults < Size): each time W reaches
	// start + k × EarlyResults inside a window, a series with new records since its previous result
	// gets an early Result of the window so far (see Result.Early). 0: none.
	EarlyResults      time.Duration
	MaxOutOfOrderness time.Duration
	IdleTimeout       time.Duration // 0: off
	MaxFutureSkew     time.Duration
	AllowedLateness   time.Duration
	// PerSource gives each source (see Batch.SetSource) a watermark of its own; W is the least over
	// the sources heard from within SourceIdleTimeout, of which at most MaxSources are held.
	PerSource         bool
	SourceIdleTimeout time.Duration
	MaxSources        int
	// What a Result's Point holds (see Point): running totals per series (Cumulative) or the records
	// of one slide; FoldLate puts late records into the series' next point, and no window fires
	// twice. Cumulative needs FoldLate. A cumulative series lives until SeriesExpiration of event time
	// has passed since its newest data.
	Cumulative       bool
	FoldLate         bool
	SeriesExpiration time.Duration
	Aggregations     []Aggregation
	// shards is the number of independently locked parts of the series table; 0 picks a default.
	shards int
	// Clock is the wall clock; nil means the system clock.
	Clock clock.Clock
}

// Aggregation says what the engine keeps for one aggregation.
type Aggregation struct {
	// MaxSeries bounds the distinct series held at once; past it records go to the overflow series.
	MaxSeries int
	// Quantiles are computed, in this order, from the whole-window sketch at every firing.
	Quantiles []float64
	// Histogram keeps a sketch and reports it (as a delta on late firings), and the values' sketch in
	// each Point.
	Histogram bool
	// Bounds, ascending and finite, are the upper bounds of explicit buckets counted exactly for each
	// Point; nil: none.
	Bounds []float64
	// Exemplars is the most exemplars a Point carries (see Point.Exemplars); 0: none are kept, and the
	// records' span ids are not read.
	Exemplars int
	// Accumulators are the outputs kept beside the totals and the sketch (see Accumulator), each a
	// gauge of the whole window: a firing's Result.Values holds their figures, in this order.
	Accumulators []AccumulatorKind
}

// KeepsSketch reports whether the aggregation keeps a sketch of its values: for its exponential
// histogram or its percentiles.
func (a Aggregation) KeepsSketch() bool { return a.Histogram || len(a.Quantiles) > 0 }

// MaxExemplars bounds Aggregation.Exemplars.
const MaxExemplars = 1000

// buckets is the number of explicit bucket counts a pane or point holds: none without bounds.
func (a Aggregation) buckets() int {
	if a.Bounds == nil {
		return 0
	}
	return len(a.Bounds) + 1
}

// maxDuration keeps window arithmetic far from int64 overflow: about 36 years.
const maxDuration = time.Duration(math.MaxInt64 / 256)

// MaxPanesPerWindow bounds size/slide: a record is in that many windows, and one record can make that
// many firings.
const MaxPanesPerWindow = 10000

// MaxSourcesLimit bounds MaxSources: a source's slot is kept in 16 bits per staged record.
const MaxSourcesLimit = 1<<16 - 1

// maxAggregations bounds the aggregations: an aggregation's index is kept in 16 bits per staged record.
const maxAggregations = 1<<16 - 1

// validate checks the engine-level rules; the component's Config.Validate names the YAML keys.
func (c Config) validate() error {
	var errs []error
	if c.Size <= 0 {
		errs = append(errs, errors.New("window size must be > 0"))
	}
	slide := c.slide()
	if slide <= 0 || slide > c.Size {
		errs = append(errs, errors.New("window slide must be > 0 and <= size"))
	} else if c.Size%slide != 0 {
		errs = append(errs, errors.New("window size must be a whole multiple of slide"))
	} else if c.Size/slide > MaxPanesPerWindow {
		errs = append(errs, fmt.Errorf("window size/slide must be at most %d", MaxPanesPerWindow))
	}
	if slide > 0 && (c.Offset <= -slide || c.Offset >= slide) {
		errs = append(errs, errors.New("window offset must be strictly between -slide and slide"))
	}
	if c.EarlyResults < 0 || c.EarlyResults > 0 && (c.EarlyResults >= c.Size || slide != c.Size) {
		errs = append(errs, errors.New("early results need tumbling windows and must be > 0 and < size"))
	}
	if c.PerSource {
		if c.SourceIdleTimeout <= 0 || c.SourceIdleTimeout > maxDuration {
			errs = append(errs, fmt.Errorf("source idle timeout must be > 0 and <= %s", maxDuration))
		}
		if c.MaxSources <= 0 || c.MaxSources > MaxSourcesLimit {
			errs = append(errs, fmt.Errorf("max sources must be between 1 and %d", MaxSourcesLimit))
		}
	}
	for name, d := range map[string]time.Duration{
		"size": c.Size, "max_out_of_orderness": c.MaxOutOfOrderness, "idle_timeout": c.IdleTimeout,
		"max_future_skew": c.MaxFutureSkew, "allowed_lateness": c.AllowedLateness,
	} {
		if d < 0 || d > maxDuration {
			errs = append(errs, fmt.Errorf("%s must be between 0 and %s", name, maxDuration))
		}
	}
	if len(c.Aggregations) == 0 {
		errs = append(errs, errors.New("at least one aggregation is required"))
	} else if len(c.Aggregations) > maxAggregations {
		errs = append(errs, fmt.Errorf("at most %d aggregations", maxAggregations))
	}
	if c.Cumulative && !c.FoldLate {
		errs = append(errs, errors.New("cumulative output needs late records folded into the next point"))
	}
	if c.Cumulative && (c.SeriesExpiration <= 0 || c.SeriesExpiration > maxDuration) {
		errs = append(errs, fmt.Errorf("series expiration must be > 0 and <= %s", maxDuration))
	}
	for i, a := range c.Aggregations {
		for j, b := range a.Bounds {
			if math.IsNaN(b) || math.IsInf(b, 0) || (j > 0 && b <= a.Bounds[j-1]) {
				errs = append(errs, fmt.Errorf("aggregation %d: bucket bounds must be finite and ascending", i))
				break
			}
		}
		if a.Exemplars < 0 || a.Exemplars > MaxExemplars {
			errs = append(errs, fmt.Errorf("aggregation %d: exemplars must be between 0 and %d", i, MaxExemplars))
		}
		if a.MaxSeries <= 0 {
			errs = append(errs, fmt.Errorf("aggregation %d: max_series must be > 0", i))
		}
		for _, k := range a.Accumulators {
			if k.New == nil || k.Name == "" {
				errs = append(errs, fmt.Errorf("aggregation %d: an accumulator needs a name and a constructor", i))
			}
		}
		for _, q := range a.Quantiles {
			if !(q >= 0 && q <= 1) {
				errs = append(errs, fmt.Errorf("aggregation %d: quantile %v outside [0, 1]", i, q))
			}
		}
	}
	return errors.Join(errs...)
}

func (c Config) slide() time.Duration {
	if c.Slide == 0 {
		return c.Size
	}
	return c.Slide
}

func (c Config) windowing() windowing {
	s := int64(c.slide())
	return windowing{size: int64(c.Size), slide: s, offset: ((int64(c.Offset) % s) + s) % s, lateness: int64(c.AllowedLateness), panesPerWindow: int64(c.Size) / s,
		cumulative: c.Cumulative, fold: c.FoldLate, expiration: int64(c.SeriesExpiration), early: int64(c.EarlyResults)}
}
