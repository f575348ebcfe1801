package ingest

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// Metric points as input: all of the component that knows pmetric as input, but for the reader
// (metricreader.go) and what a point adds (internal/metricinput): the walk that shows the
// core each data point of the metrics an aggregation names, the removal of the points taken
// (drop_aggregated_input), and pmetric's names for the instances. A late metric point is counted and
// dropped: the connector's metrics output carries window results only.

// Metrics aggregates the data points of md's metrics that some aggregation names (as Logs does,
// but never routes); the processor with drop_aggregated_input removes from md the points
// that an aggregation took. The points of the component's own scope (its results, or another
// window_aggregator's) are never taken.
func (c *Core) Metrics(ctx context.Context, md pmetric.Metrics, action LateAction) (late pmetric.Metrics, routed bool, err error) {
	sa := &c.BySignal[InputMetrics]
	if len(sa.aggs) == 0 {
		return late, false, nil
	}
	in := c.Inputs
	rd := getMetricReader(len(c.Aggs))
	defer rd.release()
	run := c.beginRun(ctx, InputMetrics, &rd.Record)
	run.points, run.in = rd, in
	in.Mu.Lock()
	in.Sweep(run.b.Watermark(), c.SeriesExpiration)
	walkTaken(md, sa, func(rm pmetric.ResourceMetrics) {
		run.setSource(rm.Resource().Attributes())
		rd.setResource(rm)
	}, rd.setScope, func(m pmetric.Metric, aggs []*Aggregation) {
		rd.setMetric(m)
		stagePoints(run, rd, aggs)
	})
	in.Mu.Unlock()
	run.apply()
	if action == LatePassed && c.DropAggregatedInput {
		removeTaken(md, sa, run.sc.state)
	}
	c.Reporter.reportPoints(ctx, rd.adds.Tally)
	return late, false, run.finish(ctx, action)
}

// walkTaken calls resource, scope and metric for the parts of md whose metrics some aggregation of
// sa names (with those aggregations), in order, skipping the component's own scope.
func walkTaken(md pmetric.Metrics, sa *SignalAggs, resource func(pmetric.ResourceMetrics), scope func(pmetric.ScopeMetrics),
	metric func(pmetric.Metric, []*Aggregation)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		resource(rm)
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sm := sms.At(j)
			if !isInput(sm) {
				continue
			}
			scope(sm)
			ms := sm.Metrics()
			for k := 0; k < ms.Len(); k++ {
				if aggs := sa.byName[ms.At(k).Name()]; len(aggs) > 0 {
					metric(ms.At(k), aggs)
				}
			}
		}
	}
}

// isInput reports whether the metrics of sm may be input: not window results (of this component or
// another window_aggregator), whatever their names.
func isInput(sm pmetric.ScopeMetrics) bool { return sm.Scope().Name() != metadata.ScopeName }

// stagePoints stages each point of the view's metric for aggregations aggs.
func stagePoints(run *ingestRun, rd *metricReader, aggs []*Aggregation) {
	switch m := rd.m; rd.p.Kind {
	case metricinput.KindValue, metricinput.KindIncrease, metricinput.KindCounter:
		var dps pmetric.NumberDataPointSlice
		if m.Type() == pmetric.MetricTypeSum {
			dps = m.Sum().DataPoints()
		} else {
			dps = m.Gauge().DataPoints()
		}
		stageEach(run, rd, aggs, dps.All(), func(dp pmetric.NumberDataPoint) { rd.p.Num = dp })
	case metricinput.KindHistogram:
		stageEach(run, rd, aggs, m.Histogram().DataPoints().All(), func(dp pmetric.HistogramDataPoint) { rd.p.Hist = dp })
	case metricinput.KindExponential:
		stageEach(run, rd, aggs, m.ExponentialHistogram().DataPoints().All(), func(dp pmetric.ExponentialHistogramDataPoint) { rd.p.Exp = dp })
	case metricinput.KindSummary:
		stageEach(run, rd, aggs, m.Summary().DataPoints().All(), func(dp pmetric.SummaryDataPoint) { rd.summary = dp })
	}
}

// anyPoint is what the points of every kind have that stageEach reads.
type anyPoint interface {
	Attributes() pcommon.Map
	Timestamp() pcommon.Timestamp
	Flags() pmetric.DataPointFlags
}

// stageEach stages the points of points, each set into the view by set, for aggregations aggs.
func stageEach[P anyPoint](run *ingestRun, rd *metricReader, aggs []*Aggregation, points func(func(int, P) bool), set func(P)) {
	for _, dp := range points {
		set(dp)
		run.stage(aggs, rd.point(dp.Attributes(), uint64(dp.Timestamp()), dp.Flags().NoRecordedValue()))
	}
}

// removeTaken removes from md the points that an aggregation took, by their outcomes (state, in the
// order walkTaken visits them): those aggregated, on time or late updates, those held back, and the
// duplicates of points taken before.
// Scopes and resources left empty by it go too.
func removeTaken(md pmetric.Metrics, sa *SignalAggs, state []outcome) {
	n := 0
	taken := func() bool {
		st := state[n]
		n++
		v, judged := st.verdict()
		return judged && v.Aggregated() || st == heldBack || st == duplicate
	}
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		removedScope := false
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			if !isInput(sm) {
				return false
			}
			removedMetric := false
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if len(sa.byName[m.Name()]) == 0 {
					return false
				}
				emptied := removePoints(m, taken)
				removedMetric = removedMetric || emptied
				return emptied
			})
			if removedMetric && sm.Metrics().Len() == 0 {
				removedScope = true
				return true
			}
			return false
		})
		return removedScope && rm.ScopeMetrics().Len() == 0
	})
}

// removePoints removes the points of m that taken says, in order, and reports whether m has none
// left and had some removed.
func removePoints(m pmetric.Metric, taken func() bool) (emptied bool) {
	removed := false
	remove := func() bool {
		t := taken()
		removed = removed || t
		return t
	}
	var left int
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		left = removeFrom(m.Gauge().DataPoints(), remove)
	case pmetric.MetricTypeSum:
		left = removeFrom(m.Sum().DataPoints(), remove)
	case pmetric.MetricTypeHistogram:
		left = removeFrom(m.Histogram().DataPoints(), remove)
	case pmetric.MetricTypeExponentialHistogram:
		left = removeFrom(m.ExponentialHistogram().DataPoints(), remove)
	case pmetric.MetricTypeSummary:
		left = removeFrom(m.Summary().DataPoints(), remove)
	}
	return removed && left == 0
}

// removeFrom removes the points of dps that remove says, in order, and returns how many are left.
func removeFrom[P any, S interface {
	RemoveIf(func(P) bool)
	Len() int
}](dps S, remove func() bool) int {
	dps.RemoveIf(func(P) bool { return remove() })
	return dps.Len()
}
