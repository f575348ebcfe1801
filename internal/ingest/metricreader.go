package ingest

import (
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottldatapoint"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// metricReader is the record view of one data point at a time: its attributes, its scope's and its
// resource's, the metric's name; the point itself (p), with the identity of its input stream; and
// what the aggregations make of the call's points until the batch is applied (adds).
type metricReader struct {
	Record
	rm pmetric.ResourceMetrics
	sm pmetric.ScopeMetrics
	m  pmetric.Metric
	p  metricinput.Point
	// summary is the point of a summary, for OTTL; refusal is metricinput.Aggregated, or why no aggregation
	// takes the point (a summary, no recorded value).
	summary pmetric.SummaryDataPoint
	refusal metricinput.Outcome
	tctx    transformContext[*ottldatapoint.TransformContext]

	// The identity of the point's stream, by part, computed when a cumulative stream first asks.
	hasher identityHasher
	outer  outerIdentities
	nameID identity
	nameOK bool
	key    metricinput.Key
	keyOK  bool
	// kindID hashes what identifies a point besides its stream and times (its metric's type and
	// unit, how it is taken), once per metric, for dedup
	idBuf  []byte
	kindID uint64
	kindOK bool

	adds metricinput.Adder
}

var metricReaders = sync.Pool{New: func() any {
	rd := new(metricReader)
	rd.src = rd
	rd.p.StreamKey = rd.streamKey
	return rd
}}

// getMetricReader returns a reader for a call, of a component of aggs aggregations.
func getMetricReader(aggs int) *metricReader {
	rd := metricReaders.Get().(*metricReader)
	rd.adds.Begin(aggs)
	return rd
}

func (rd *metricReader) release() {
	rd.tctx.close()
	rd.clear()
	rd.rm, rd.sm, rd.m, rd.summary = pmetric.ResourceMetrics{}, pmetric.ScopeMetrics{}, pmetric.Metric{}, pmetric.SummaryDataPoint{}
	rd.p.Num, rd.p.Hist, rd.p.Exp = pmetric.NumberDataPoint{}, pmetric.HistogramDataPoint{}, pmetric.ExponentialHistogramDataPoint{}
	rd.adds.Release()
	metricReaders.Put(rd)
}

// setResource points the view at the metrics of rm.
func (rd *metricReader) setResource(rm pmetric.ResourceMetrics) {
	rd.rm = rm
	rd.outer.forget()
}

// setScope points the view at the metrics of sm.
func (rd *metricReader) setScope(sm pmetric.ScopeMetrics) {
	rd.sm = sm
	rd.outer.forgetScope()
	rd.Record.setScope(sm.Scope().Attributes(), rd.rm.Resource().Attributes())
}

// setMetric points the view at the points of metric m.
func (rd *metricReader) setMetric(m pmetric.Metric) {
	rd.m, rd.nameOK, rd.kindOK = m, false, false
	rd.p.Kind, rd.p.Cumulative = metricinput.KindOf(m)
	rd.Field[fieldMetricName] = m.Name()
}

// point readies the view for another point, with attributes attrs, at Timestamp t; noValue: it is
// flagged as having no recorded value.
func (rd *metricReader) point(attrs pcommon.Map, t uint64, noValue bool) int64 {
	rd.tctx.close()
	rd.next(attrs)
	rd.keyOK = false
	rd.adds.Next()
	rd.refusal = metricinput.Aggregated
	switch {
	case rd.p.Kind == metricinput.KindSummary:
		rd.refusal = metricinput.SummaryOutcome
	case noValue:
		rd.refusal = metricinput.NoRecordedValue
	}
	return timeOf(t)
}

// streamKey returns the key of the point's input stream.
func (rd *metricReader) streamKey() metricinput.Key {
	if rd.keyOK {
		return rd.key
	}
	h := &rd.hasher
	res, scope := rd.outer.resource(h, rd.rm.Resource().Attributes()), rd.outer.scope(h, rd.sm.Scope())
	if !rd.nameOK {
		rd.nameID, rd.nameOK = h.hashName(rd.m.Name()), true
	}
	rd.key, rd.keyOK = h.key(res, scope, rd.nameID, h.hashMap(rd.Attrs)), true
	return rd.key
}

func (rd *metricReader) weightSeed() uint64 { return 0 } // metric points weigh 1, or their count

// identity is the point's identity for dedup: its input stream (resource, scope, metric name,
// attributes), the metric's type and unit, what the point is taken as (kind: a monotonic sum's
// temporality among others), and the point's start time and time: a resent gauge or delta point is
// the same point.
func (rd *metricReader) identity() (dedup.ID, bool) {
	if !rd.kindOK {
		b := append(rd.idBuf[:0], byte(rd.m.Type()), byte(rd.p.Kind))
		rd.idBuf = append(b, rd.m.Unit()...)
		rd.kindID, rd.kindOK = uint64(dedup.Hash(rd.idBuf)), true
	}
	start, t := rd.times()
	return dedup.Point(rd.streamKey(), rd.kindID, start, t), true
}

// times returns the point's start time and time, a summary's among them.
func (rd *metricReader) times() (start, t uint64) {
	if rd.p.Kind == metricinput.KindSummary {
		return uint64(rd.summary.StartTimestamp()), uint64(rd.summary.Timestamp())
	}
	pt, start := rd.p.Times()
	return start, uint64(pt)
}

func (rd *metricReader) ottlContext() any {
	return rd.tctx.get(func() *ottldatapoint.TransformContext {
		var dp any
		switch rd.p.Kind {
		case metricinput.KindHistogram:
			dp = rd.p.Hist
		case metricinput.KindExponential:
			dp = rd.p.Exp
		case metricinput.KindSummary:
			dp = rd.summary
		default:
			dp = rd.p.Num
		}
		return ottldatapoint.NewTransformContext(rd.rm, rd.sm, rd.m, dp)
	})
}
