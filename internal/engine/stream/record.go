package stream

import "github.com/windowaggregator/windowaggregator/internal/engine/sketch"

// Record is one record of one aggregation as the engine takes it: what the component reads of a span
// or a log record for that aggregation.
type Record struct {
	Agg   int     // the aggregation: its index in Config.Aggregations
	Key   []byte  // the series key; staging copies it, so the caller may reuse its buffer
	Time  int64   // event time, Unix ns
	Value float64 // a NaN or infinite value is counted but left out of the value aggregates
	Tag   int32   // the caller's name for the record, handed back by Apply with its verdict
	// TraceID and SpanID name the span the record is, for the aggregations that keep exemplars; a zero
	// TraceID (not a valid one): the record gives no exemplar.
	TraceID [16]byte
	SpanID  [8]byte
	// Weight is the records this one stands for (a sampled span's adjusted count): it counts as
	// Weight records of its value in every aggregate but min, max and exemplars. 0 means 1.
	Weight uint32
	// IDs are the record's identifiers for the aggregation's accumulators that take one
	// (AccumulatorKind.ID): hashes of a value such as a user id or the trace id, 0 where the record
	// has none. Staging copies them.
	IDs []uint64
}

// Distribution is a record that is itself a distribution of values (a histogram data point), staged
// with StageDistribution: Count values (> 0) adding up to Sum, between Min and Max if HasMinMax (else
// a window of such records alone has no min and max: they are +Inf and -Inf), counted in the
// aggregation's explicit buckets (Buckets, len(Bounds)+1 of them, bucket i holding the values in
// (Bounds[i-1], Bounds[i]]; nil: it adds to no bucket) and held by Sketch (merged into the
// aggregation's sketches, at the coarser of their scales; nil: it adds nothing to them). It counts as
// Count records in count, as its values in sum, avg, min, max, the histograms and the percentiles;
// with NoValues (a histogram point without a sum) in count alone, whatever its other fields say.
// Buckets of another length than len(Bounds)+1 are taken as nil. Counts saturate at 2^64-1.
type Distribution struct {
	Count     uint64
	Sum       float64
	Min, Max  float64
	HasMinMax bool
	NoValues  bool
	Buckets   []uint64
	Sketch    *sketch.Histogram
}
