package windowaggregator

import (
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// The memory formula of the README, per aggregation (and, with dedup, for the component what a full
// set of max_ids identities takes, dedup.Footprint: at most 12 bytes an identity):
//
//	bytes ≈ (max_series + 1) × (seriesBytes + key bytes + A + P × (paneBytes + S + B + X + C)) + I
//	P = (size + allowed_lateness + max_out_of_orderness + max_future_skew) / slide + 1
//	I = max_input_streams × (inputStreamBytes + B' + S') for metrics, else 0
//
// with S the sketch of a pane (none without percentiles or an exponential histogram, twice with an
// exponential histogram whose late firings revise, for its late deltas), B the explicit buckets' counts
// of a pane (8 bytes a bucket; twice when late firings revise), X a pane's exemplars (with k the
// exemplars kept, max_per_data_point or 1 for the max gauge alone: paneExemplarsBytes +
// exemplarBytes × (k - 1), the second term twice when late firings revise), and A what a series adds
// up beyond its panes with cumulative output or folded late records: accrualBytes, a sketch with an
// exponential histogram, B, and with exemplars reservoirBytes + exemplarBytes × (k - 1); C a pane's
// accumulators, at most stream.AccumulatorKind.Bytes each (stddev and stdvar 40, a distinct output
// 12 KiB and 64 bytes once it holds more than 64 values). With early results, A also holds what they sent:
// earlySentBytes, B, and a sketch with an exponential histogram (and accrualBytes with revise). The
// estimate logged at start takes assumedKeyBytes per group_by key and assumedSketch bytes per sketch;
// the README says how to read it. A metrics aggregation keeps per cumulative input stream its last
// point (inputStreamBytes), with its explicit buckets' counts when they are the output's (B', 8 bytes
// a bucket), and its exponential histogram when the aggregation keeps a sketch (S', inputSketchBytes,
// for an OpenTelemetry SDK's default of at most 160 buckets a sign).
const (
	inputStreamBytes = 130
	inputSketchBytes = 180 + 160
)

const (
	seriesBytes     = 550
	paneBytes       = 168
	accrualBytes    = 200
	earlySentBytes  = 100
	assumedKeyBytes = 64
	assumedSketch   = 1024
	// Exemplars: a pane's two reservoirs, one reservoir, and one exemplar kept (48 bytes, and at most
	// an eighth more for the size class of a reservoir's sample).
	paneExemplarsBytes = 210
	reservoirBytes     = 112
	exemplarBytes      = 55
)

// A result data point kept for delivery, as pdata (bench/README.md, "Memory and checkpoints"): a
// sum or gauge with a few attributes, and what a histogram adds per explicit bucket or per
// exponential bucket (in halves of a byte), and one exemplar.
const (
	pendingPointBytes      = 345
	explicitBucketBytes    = 19
	exponentialHalfBuckets = 17
	pendingExemplarBytes   = 150
)

// pendingPointEstimate is the bytes of the largest data point that aggregation a emits.
func pendingPointEstimate(a *ingest.Aggregation) int64 {
	exemplars := pendingExemplarBytes * int64(a.Exemplars) // the histogram's, or the max gauge's one
	switch {
	case !a.Histogram:
		return pendingPointBytes + exemplars
	case a.Bounds != nil:
		return pendingPointBytes + explicitBucketBytes*int64(len(a.Bounds)+1) + exemplars
	default:
		return pendingPointBytes + exponentialHalfBuckets*int64(a.HistMax)/2 + exemplars
	}
}

// panesPerSeries is P: the panes one series can hold at once while W follows the clock.
func panesPerSeries(cfg *Config) int64 {
	span := cfg.Window.Size + cfg.AllowedLateness + cfg.Watermark.MaxOutOfOrderness + cfg.Watermark.MaxFutureSkew
	return int64(span/cfg.Window.slide()) + 1
}

// memoryEstimate is the formula for one aggregation, in bytes.
func memoryEstimate(cfg *Config, a *ingest.Aggregation) int64 {
	revise := cfg.LateFirings == lateRevise
	exponential := a.Histogram && a.Bounds == nil
	var sketch, counts, accrual int64
	if exponential || len(a.Quantiles) > 0 {
		sketch = assumedSketch
		if exponential && revise {
			sketch *= 2
		}
	}
	if a.Bounds != nil {
		counts = 8 * int64(len(a.Bounds)+1)
	}
	if !revise { // cumulative output, or folded late records (revise is delta only)
		accrual = accrualBytes + counts
		if exponential {
			accrual += assumedSketch
		}
	}
	paneCounts := counts
	if revise {
		paneCounts *= 2
	}
	var paneExemplars int64
	if k := int64(a.Exemplars); k > 0 {
		paneExemplars = paneExemplarsBytes + exemplarBytes*(k-1)
		if revise {
			paneExemplars += exemplarBytes * (k - 1)
		} else {
			accrual += reservoirBytes + exemplarBytes*(k-1)
		}
	}
	if cfg.Window.EarlyResults > 0 {
		// What the early results of the open window have sent: totals, bucket counts, a sketch with
		// an exponential histogram; in an accrual, which revise does not otherwise make.
		if revise {
			accrual += accrualBytes
		}
		accrual += earlySentBytes + counts
		if exponential {
			accrual += assumedSketch
		}
	}
	var accs int64
	for _, k := range a.Accumulators {
		accs += int64(k.Bytes)
	}
	key := int64(assumedKeyBytes * len(a.GroupBy))
	return int64(cfg.MaxSeries+1)*(seriesBytes+key+accrual+panesPerSeries(cfg)*(paneBytes+sketch+paneCounts+paneExemplars+accs)) +
		inputStreamsEstimate(cfg, a)
}

// inputStreamsEstimate is term I: what a metrics aggregation keeps of max_input_streams cumulative
// input streams.
func inputStreamsEstimate(cfg *Config, a *ingest.Aggregation) int64 {
	if !a.Signal.Points {
		return 0
	}
	per := int64(inputStreamBytes)
	if a.Bounds != nil {
		per += 8 * int64(len(a.Bounds)+1)
	}
	if a.FeedsSketch() {
		per += inputSketchBytes
	}
	return int64(cfg.MaxInputStreams) * per
}

// logMemoryEstimate logs the formula's value for configuration cfg and its aggregations aggs, so that
// an operator sees what a geometry costs before it is reached.
func logMemoryEstimate(logger *zap.Logger, cfg *Config, aggs []*ingest.Aggregation) {
	var total int64
	fields := []zap.Field{zap.Int64("panes_per_series", panesPerSeries(cfg)), zap.Int("max_series", cfg.MaxSeries)}
	for _, a := range aggs {
		b := memoryEstimate(cfg, a)
		total += b
		fields = append(fields, zap.Int64("bytes."+a.Name, b))
	}
	if cfg.Dedup.Enabled {
		d := dedup.Footprint(cfg.Dedup.MaxIDs)
		total += d
		fields = append(fields, zap.Int64("bytes.dedup", d))
	}
	fields = append(fields, zap.Int64("bytes", total))
	// And the results kept while the metrics consumer fails, at most emit.max_pending_points.
	var point int64
	for _, a := range aggs {
		point = max(point, pendingPointEstimate(a))
	}
	fields = append(fields, zap.Int64("bytes.pending_points", int64(cfg.Emit.MaxPendingPoints)*point))
	logger.Info("Window state memory estimate at max_series (README, Memory)", fields...)
}
