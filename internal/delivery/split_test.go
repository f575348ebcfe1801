package delivery

import (
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// flatPoints lists every data point of md with what it is under, in order.
func flatPoints(md pmetric.Metrics) []string {
	var out []string
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			for k := 0; k < sm.Metrics().Len(); k++ {
				m := sm.Metrics().At(k)
				head := fmt.Sprintf("%v|%s@%s|%s (%s, %s, %v)", rm.Resource().Attributes().AsRaw(), sm.Scope().Name(), rm.SchemaUrl(),
					m.Name(), m.Unit(), m.Description(), m.Type())
				switch m.Type() {
				case pmetric.MetricTypeSum:
					s := m.Sum()
					for d := 0; d < s.DataPoints().Len(); d++ {
						dp := s.DataPoints().At(d)
						out = append(out, fmt.Sprintf("%s %v %v %v=%d", head, s.AggregationTemporality(), s.IsMonotonic(), dp.Attributes().AsRaw(), dp.IntValue()))
					}
				case pmetric.MetricTypeGauge:
					for d := 0; d < m.Gauge().DataPoints().Len(); d++ {
						dp := m.Gauge().DataPoints().At(d)
						out = append(out, fmt.Sprintf("%s %v=%v", head, dp.Attributes().AsRaw(), dp.DoubleValue()))
					}
				case pmetric.MetricTypeHistogram:
					h := m.Histogram()
					for d := 0; d < h.DataPoints().Len(); d++ {
						dp := h.DataPoints().At(d)
						out = append(out, fmt.Sprintf("%s %v %v=%d %v", head, h.AggregationTemporality(), dp.Attributes().AsRaw(), dp.Count(), dp.BucketCounts().AsRaw()))
					}
				case pmetric.MetricTypeExponentialHistogram:
					h := m.ExponentialHistogram()
					for d := 0; d < h.DataPoints().Len(); d++ {
						dp := h.DataPoints().At(d)
						out = append(out, fmt.Sprintf("%s %v %v=%d %d", head, h.AggregationTemporality(), dp.Attributes().AsRaw(), dp.Count(), dp.Scale()))
					}
				}
			}
		}
	}
	return out
}

// A batch of 2 resources and the four metric types, 18 points, cut at every size from 1 to 14: each
// part within the size, the parts' points together the batch's, in order, each under its own
// resource, scope and metric.
func TestSplitMetricsKeepsEveryPointInOrder(t *testing.T) {
	md := pmetric.NewMetrics()
	for r, n := range []int{2, 1} {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", fmt.Sprint("svc", r))
		rm.SetSchemaUrl("https://schema/" + fmt.Sprint(r))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("scope")
		sum := sm.Metrics().AppendEmpty()
		sum.SetName("c")
		sum.SetUnit("{span}")
		s := sum.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		g := sm.Metrics().AppendEmpty()
		g.SetName("g")
		gg := g.SetEmptyGauge()
		h := sm.Metrics().AppendEmpty()
		h.SetName("h")
		hh := h.SetEmptyHistogram()
		hh.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		e := sm.Metrics().AppendEmpty()
		e.SetName("e")
		ee := e.SetEmptyExponentialHistogram()
		for i := range n * 2 {
			dp := s.DataPoints().AppendEmpty()
			dp.SetIntValue(int64(i))
			dp.Attributes().PutInt("i", int64(i))
		}
		for i := range n {
			gg.DataPoints().AppendEmpty().SetDoubleValue(float64(i) + 0.5)
			hp := hh.DataPoints().AppendEmpty()
			hp.SetCount(uint64(i + 3))
			hp.BucketCounts().FromRaw([]uint64{1, uint64(i + 2)})
			ep := ee.DataPoints().AppendEmpty()
			ep.SetCount(uint64(i + 7))
			ep.SetScale(int32(i))
		}
		for range n {
			gg.DataPoints().AppendEmpty().SetDoubleValue(9)
		}
	}
	want := flatPoints(md)
	total := md.DataPointCount()
	if total != len(want) || total != 18 {
		t.Fatalf("fixture: %d points, %d listed", total, len(want))
	}
	for max := 1; max <= total+1; max++ {
		parts := splitMetrics(md, total, max)
		var got []string
		for i, p := range parts {
			if n := p.DataPointCount(); n > max || n == 0 || (n < max && i < len(parts)-1) {
				t.Fatalf("max %d: part %d holds %d points", max, i, n)
			}
			got = append(got, flatPoints(p)...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("max %d: the parts hold\n%v\nwant\n%v", max, got, want)
		}
		if wantParts := (total + max - 1) / max; len(parts) != wantParts {
			t.Fatalf("max %d: %d parts, want %d", max, len(parts), wantParts)
		}
	}
}

// Points with large attributes go out in requests under maxSendBytes, whatever max_points_per_send
// allows: ten points of 1 MiB each, in requests of at most three.
func TestRequestsStayUnderTheMessageLimit(t *testing.T) {
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("g")
	dps := g.SetEmptyGauge().DataPoints()
	big := string(make([]byte, 1<<20))
	for i := range 10 {
		dp := dps.AppendEmpty()
		dp.SetDoubleValue(float64(i))
		dp.Attributes().PutStr("k", big)
	}
	var sizer pmetric.ProtoMarshaler
	parts := requestParts(md, 10, 2000)
	total := 0
	for _, p := range parts {
		if size := sizer.MetricsSize(p.md); size > maxSendBytes {
			t.Fatalf("a request of %d bytes, over %d", size, maxSendBytes)
		}
		if n := p.md.DataPointCount(); n != p.points {
			t.Fatalf("a request of %d points counted as %d", n, p.points)
		}
		total += p.points
	}
	if total != 10 || len(parts) < 4 {
		t.Fatalf("%d points in %d requests, want 10 in at least 4", total, len(parts))
	}
}

// The builder closes a batch before a result would take it past emit.max_points_per_send, so that
// requests come out bounded without copying: ten results of 3 points each, at most 10 a batch, come
// out as 9, 9, 9 and 3, every point once.
func TestBuilderClosesBatchesAtTheBound(t *testing.T) {
	b := newBuilder([]*Aggregation{testAggregation(t, "n", "count", "sum", "max")}, "test", pmetric.AggregationTemporalityDelta, 10)
	for i := range 10 {
		b.add(&stream.Result{Overflow: true, Start: int64(i) * 1e9, End: int64(i+1) * 1e9, HasWindow: true, HasPoint: true,
			Point: stream.Point{Count: 1, ValueCount: 1, Sum: 2}, WindowValueCount: 1, Max: 2})
	}
	var sizes []int
	for _, built := range b.take() {
		if built.md.DataPointCount() != built.points {
			t.Fatalf("a batch says %d points and holds %d", built.points, built.md.DataPointCount())
		}
		sizes = append(sizes, built.points)
	}
	if !slices.Equal(sizes, []int{9, 9, 9, 3}) {
		t.Fatalf("batches of %v points, want 9, 9, 9, 3", sizes)
	}
	if len(b.take()) != 0 {
		t.Fatal("take left batches behind")
	}
}
