package windowaggregator

import "go.uber.org/zap"

// The memory formula of the README, per aggregation:
//
//	bytes ≈ (max_series + 1) × (seriesBytes + key bytes + P × (paneBytes + S))
//	P = (size + allowed_lateness + max_out_of_orderness + max_future_skew) / slide + 1
//
// with S the sketch of a pane (none without percentiles or histogram, twice with histogram for its
// late deltas). The estimate logged at start takes assumedKeyBytes per group_by key and assumedSketch
// bytes per sketch; the README says how to read it.
const (
	seriesBytes     = 550
	paneBytes       = 150
	assumedKeyBytes = 64
	assumedSketch   = 1024
)

// panesPerSeries is P: the panes one series can hold at once while W follows the clock.
func panesPerSeries(cfg *Config) int64 {
	slide := cfg.Window.Slide
	if slide == 0 {
		slide = cfg.Window.Size
	}
	span := cfg.Window.Size + cfg.AllowedLateness + cfg.Watermark.MaxOutOfOrderness + cfg.Watermark.MaxFutureSkew
	return int64(span/slide) + 1
}

// memoryEstimate is the formula for one aggregation, in bytes.
func memoryEstimate(cfg *Config, a *aggregation) int64 {
	var sketch int64
	if a.hasOutput(outputHistogram) || len(a.quantiles) > 0 {
		sketch = assumedSketch
		if a.hasOutput(outputHistogram) {
			sketch *= 2
		}
	}
	key := int64(assumedKeyBytes * len(a.groupBy))
	return int64(cfg.MaxSeries+1) * (seriesBytes + key + panesPerSeries(cfg)*(paneBytes+sketch))
}

// logMemoryEstimate logs the formula's value for the configuration, so that an operator sees what a
// geometry costs before it is reached.
func (s *shared) logMemoryEstimate() {
	var total int64
	fields := []zap.Field{zap.Int64("panes_per_series", panesPerSeries(s.cfg)), zap.Int("max_series", s.cfg.MaxSeries)}
	for _, a := range s.aggs {
		b := memoryEstimate(s.cfg, a)
		total += b
		fields = append(fields, zap.Int64("bytes."+a.name, b))
	}
	fields = append(fields, zap.Int64("bytes", total))
	s.logger.Info("Window state memory estimate at max_series (README, Memory)", fields...)
}
