package ingest

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/sampling"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// weightKind is how an aggregation weighs its records (its weight key): a record of weight w stands
// for w records in count, sum, avg, the histograms and the percentiles.
type weightKind uint8

const (
	WeighNone          weightKind = iota // every record weighs 1
	WeighAdjustedCount                   // a span's adjusted count, from the sampling threshold in its tracestate
	WeighAttribute                       // a numeric attribute of the record
)

// maxWeight bounds a record's weight, so that counts (uint64) cannot wrap before 2^32 records of
// the greatest weight have been counted. A greater weight is taken as maxWeight, and counted.
const maxWeight = math.MaxUint32

// Reasons a record does not weigh what its configuration says: it weighs 1 instead (maxWeight for
// weightTooLarge). Each name is a counter attribute.
type weightReason uint8

const (
	WeightOK weightReason = iota
	weightMalformedTraceState
	weightMissing
	weightNotNumeric
	weightNotFinite
	weightNotPositive
	weightTooLarge
	NumWeightReasons
)

var weightReasonNames = [NumWeightReasons]string{
	weightMalformedTraceState: "malformed_tracestate", weightMissing: "missing", weightNotNumeric: "not_numeric",
	weightNotFinite: "not_finite", weightNotPositive: "not_positive", weightTooLarge: "too_large",
}

// adjustedCount returns the adjusted count of a span whose W3C tracestate is ts, as contrib's
// pkg/sampling computes it: 2^56 / (2^56 - threshold) for the OpenTelemetry threshold th (ot=th:c is
// 4), 1 without a threshold, and 1 for a tracestate that does not parse.
func adjustedCount(ts string) (float64, weightReason) {
	if ts == "" {
		return 1, WeightOK
	}
	w3c, err := sampling.NewW3CTraceState(ts)
	if err != nil {
		return 1, weightMalformedTraceState
	}
	if n := w3c.OTelValue().AdjustedCount(); n > 0 { // 0: no threshold
		return n, WeightOK
	}
	return 1, WeightOK
}

// traceStates caches the adjusted count of the tracestate read last: the spans of one trace share
// their tracestate, and mostly come together.
type traceStates struct {
	raw  string
	n    float64
	why  weightReason
	used bool
}

func (c *traceStates) adjustedCount(ts string) (float64, weightReason) {
	if ts == "" {
		return 1, WeightOK
	}
	if !c.used || ts != c.raw {
		c.n, c.why = adjustedCount(ts)
		c.raw, c.used = ts, true
	}
	return c.n, c.why
}

// roundWeight makes weight w (finite, > 0) a whole number of records: its integer part, plus one with
// a probability of its fractional part, decided by seed(), a uniform number drawn from the record
// itself (see weightSeed) and asked for only when w has a fractional part. So the expected count is
// the true weighted total, and a replay, or another collector, rounds a record the same way. A weight
// below 1 may round to 0: the record then stands for no record of its aggregation. A weight above
// maxWeight is maxWeight.
func roundWeight(w float64, seed func() uint64) (uint32, weightReason) {
	if w >= maxWeight {
		if w > maxWeight {
			return maxWeight, weightTooLarge
		}
		return maxWeight, WeightOK
	}
	n := math.Floor(w)
	if f := w - n; f > 0 && float64(seed()>>11)*0x1p-53 < f {
		n++
	}
	return uint32(n), WeightOK
}

// weightSeed is a uniform 64-bit number drawn from a record's identity: a span's trace and span ids;
// a log record's, with its timestamp and observed timestamp (0 for spans).
func weightSeed(trace pcommon.TraceID, span pcommon.SpanID, ts, observed pcommon.Timestamp) uint64 {
	var b [40]byte
	copy(b[:16], trace[:])
	copy(b[16:24], span[:])
	binary.LittleEndian.PutUint64(b[24:], uint64(ts))
	binary.LittleEndian.PutUint64(b[32:], uint64(observed))
	return xxhash.Sum64(b[:])
}
