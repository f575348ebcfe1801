package delivery

import (
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// maxSendBytes bounds a request's protobuf size below gRPC's default 4 MiB message limit, which most
// OTLP receivers keep, whatever the size of the points (a group_by value may take 4 KiB).
const maxSendBytes = 4<<20 - 64<<10

// requestParts cuts md (points data points) into requests of at most maxPoints data points and
// maxSendBytes bytes, each with its count of points; a single point larger than that goes alone.
func requestParts(md pmetric.Metrics, points, maxPoints int) []builtBatch {
	var sizer pmetric.ProtoMarshaler
	var out []builtBatch
	var cut func(part pmetric.Metrics, n int)
	cut = func(part pmetric.Metrics, n int) {
		if n <= 1 || sizer.MetricsSize(part) <= maxSendBytes {
			out = append(out, builtBatch{part, n})
			return
		}
		first := (n + 1) / 2
		halves := splitMetrics(part, n, first)
		cut(halves[0], first)
		cut(halves[1], n-first)
	}
	// splitMetrics fills each batch to maxPoints before it begins the next.
	for i, part := range splitMetrics(md, points, maxPoints) {
		cut(part, min(maxPoints, points-i*maxPoints))
	}
	return out
}

// splitMetrics cuts md, which holds points data points, into batches of at most max data points each,
// in order, every point under copies of its resource, scope and metric. md itself is the one batch
// when it fits.
func splitMetrics(md pmetric.Metrics, points, max int) []pmetric.Metrics {
	if points <= max {
		return []pmetric.Metrics{md}
	}
	var out []pmetric.Metrics
	cur := pmetric.NewMetrics()
	n := 0
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			ms := sm.Metrics()
			var outSM pmetric.ScopeMetrics
			opened := false // outSM is in cur
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				total := dataPointCount(m)
				for from := 0; from < total; {
					if !opened {
						outRM := cur.ResourceMetrics().AppendEmpty()
						rm.Resource().CopyTo(outRM.Resource())
						outRM.SetSchemaUrl(rm.SchemaUrl())
						outSM = outRM.ScopeMetrics().AppendEmpty()
						sm.Scope().CopyTo(outSM.Scope())
						outSM.SetSchemaUrl(sm.SchemaUrl())
						opened = true
					}
					to := min(total, from+max-n)
					copyMetricPoints(m, outSM.Metrics().AppendEmpty(), from, to)
					n += to - from
					from = to
					if n == max {
						out = append(out, cur)
						cur, n, opened = pmetric.NewMetrics(), 0, false
					}
				}
			}
		}
	}
	if n > 0 {
		out = append(out, cur)
	}
	return out
}

// dataPointCount is the number of data points of one metric.
func dataPointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// copyMetricPoints makes dst a copy of m with only its data points [from, to).
func copyMetricPoints(m, dst pmetric.Metric, from, to int) {
	dst.SetName(m.Name())
	dst.SetDescription(m.Description())
	dst.SetUnit(m.Unit())
	m.Metadata().CopyTo(dst.Metadata())
	switch m.Type() {
	case pmetric.MetricTypeSum:
		s := dst.SetEmptySum()
		s.SetAggregationTemporality(m.Sum().AggregationTemporality())
		s.SetIsMonotonic(m.Sum().IsMonotonic())
		copyPoints(m.Sum().DataPoints(), s.DataPoints(), from, to)
	case pmetric.MetricTypeGauge:
		copyPoints(m.Gauge().DataPoints(), dst.SetEmptyGauge().DataPoints(), from, to)
	case pmetric.MetricTypeHistogram:
		h := dst.SetEmptyHistogram()
		h.SetAggregationTemporality(m.Histogram().AggregationTemporality())
		copyPoints(m.Histogram().DataPoints(), h.DataPoints(), from, to)
	case pmetric.MetricTypeExponentialHistogram:
		h := dst.SetEmptyExponentialHistogram()
		h.SetAggregationTemporality(m.ExponentialHistogram().AggregationTemporality())
		copyPoints(m.ExponentialHistogram().DataPoints(), h.DataPoints(), from, to)
	case pmetric.MetricTypeSummary:
		copyPoints(m.Summary().DataPoints(), dst.SetEmptySummary().DataPoints(), from, to)
	}
}

// pointSlice is what every pdata data point slice has.
type pointSlice[P interface{ CopyTo(P) }] interface {
	At(int) P
	AppendEmpty() P
}

// copyPoints appends copies of src's points [from, to) to dst.
func copyPoints[P interface{ CopyTo(P) }, S pointSlice[P]](src, dst S, from, to int) {
	for i := from; i < to; i++ {
		src.At(i).CopyTo(dst.AppendEmpty())
	}
}
