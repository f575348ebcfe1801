package windowaggregator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
)

// Metric points as input: batches built from specs, and the component run in either form on them,
// with its fake clock in the test's hands.

// inKind is the kind of an input metric.
type inKind uint8

const (
	inGauge inKind = iota
	inUpDown
	inDeltaSum
	inCounter // monotonic cumulative sum
	inHistogram
	inCumulativeHistogram
	inExponential
	inCumulativeExponential
	inSummary
)

// inPoint is one input data point, of a pod: the resource has service.name and k8s.pod.name; times
// are in seconds (start 0: none).
type inPoint struct {
	service, pod string
	metric       string
	kind         inKind
	unit         string
	t, start     int64
	v            float64
	attrs        map[string]any
	noValue      bool // flagged as having no recorded value
	unset        bool // a number point whose value is not set (neither int nor double)
	hist         *inHist
	// again is what metric_points says of the point when it is resent with dedup on: "" for a
	// duplicate (its first copy was aggregated), else the outcome its first copy had again.
	again string
}

// inHist is a histogram point: explicit bounds and counts, or exponential (scale, offset and counts
// of the positive side, and of the negative side in negOffset and negBuckets).
type inHist struct {
	count      uint64
	sum        float64
	noSum      bool
	min, max   float64
	hasMinMax  bool
	bounds     []float64
	buckets    []uint64
	scale      int32
	offset     int32
	zero       uint64
	negOffset  int32
	negBuckets []uint64
}

// inMetrics builds one batch: a resource per pod (in order of first appearance), one scope, a metric
// per name and kind, the points in order.
func inMetrics(pts ...inPoint) pmetric.Metrics {
	md := pmetric.NewMetrics()
	res := map[string]pmetric.ScopeMetrics{}
	metrics := map[string]pmetric.Metric{}
	for _, p := range pts {
		rk := p.service + "/" + p.pod
		sm, ok := res[rk]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", p.service)
			rm.Resource().Attributes().PutStr("k8s.pod.name", p.pod)
			sm = rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName("app")
			res[rk] = sm
		}
		mk := fmt.Sprintf("%s/%s/%d", rk, p.metric, p.kind)
		m, ok := metrics[mk]
		if !ok {
			m = sm.Metrics().AppendEmpty()
			m.SetName(p.metric)
			m.SetUnit(p.unit)
			switch p.kind {
			case inGauge:
				m.SetEmptyGauge()
			case inUpDown, inDeltaSum, inCounter:
				sum := m.SetEmptySum()
				sum.SetIsMonotonic(p.kind != inUpDown)
				sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
				if p.kind == inDeltaSum {
					sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
				}
			case inHistogram, inCumulativeHistogram:
				m.SetEmptyHistogram().SetAggregationTemporality(temporalityOf(p.kind == inCumulativeHistogram))
			case inExponential, inCumulativeExponential:
				m.SetEmptyExponentialHistogram().SetAggregationTemporality(temporalityOf(p.kind == inCumulativeExponential))
			case inSummary:
				m.SetEmptySummary()
			}
			metrics[mk] = m
		}
		p.appendTo(m)
	}
	return md
}

func temporalityOf(cumulative bool) pmetric.AggregationTemporality {
	if cumulative {
		return pmetric.AggregationTemporalityCumulative
	}
	return pmetric.AggregationTemporalityDelta
}

// common sets what every point has.
type pointCommon interface {
	Attributes() pcommon.Map
	SetTimestamp(pcommon.Timestamp)
	SetStartTimestamp(pcommon.Timestamp)
}

func (p inPoint) fill(dp pointCommon) {
	dp.SetTimestamp(pcommon.Timestamp(p.t * s))
	dp.SetStartTimestamp(pcommon.Timestamp(p.start * s))
	_ = dp.Attributes().FromRaw(p.attrs)
}

// histogramFields is what the histogram points of both kinds have that fillHistogram sets.
type histogramFields interface {
	pointCommon
	SetFlags(pmetric.DataPointFlags)
	SetCount(uint64)
	SetSum(float64)
	SetMin(float64)
	SetMax(float64)
}

// fillHistogram sets what a histogram point of either kind has: times, attributes, flags, count,
// sum, min and max.
func (p inPoint) fillHistogram(dp histogramFields, flags pmetric.DataPointFlags) {
	p.fill(dp)
	dp.SetFlags(flags)
	h := p.hist
	dp.SetCount(h.count)
	if !h.noSum {
		dp.SetSum(h.sum)
	}
	if h.hasMinMax {
		dp.SetMin(h.min)
		dp.SetMax(h.max)
	}
}

func (p inPoint) appendTo(m pmetric.Metric) {
	flags := pmetric.DefaultDataPointFlags.WithNoRecordedValue(p.noValue)
	switch m.Type() {
	case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
		var dp pmetric.NumberDataPoint
		if m.Type() == pmetric.MetricTypeSum {
			dp = m.Sum().DataPoints().AppendEmpty()
		} else {
			dp = m.Gauge().DataPoints().AppendEmpty()
		}
		p.fill(dp)
		dp.SetFlags(flags)
		switch {
		case p.unset:
		case p.v == float64(int64(p.v)):
			dp.SetIntValue(int64(p.v))
		default:
			dp.SetDoubleValue(p.v)
		}
	case pmetric.MetricTypeHistogram:
		dp := m.Histogram().DataPoints().AppendEmpty()
		p.fillHistogram(dp, flags)
		dp.ExplicitBounds().FromRaw(p.hist.bounds)
		dp.BucketCounts().FromRaw(p.hist.buckets)
	case pmetric.MetricTypeExponentialHistogram:
		dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
		p.fillHistogram(dp, flags)
		h := p.hist
		dp.SetScale(h.scale)
		dp.SetZeroCount(h.zero)
		dp.Positive().SetOffset(h.offset)
		dp.Positive().BucketCounts().FromRaw(h.buckets)
		dp.Negative().SetOffset(h.negOffset)
		dp.Negative().BucketCounts().FromRaw(h.negBuckets)
	case pmetric.MetricTypeSummary:
		dp := m.Summary().DataPoints().AppendEmpty()
		p.fill(dp)
		dp.SetCount(uint64(p.v))
		dp.SetSum(p.v)
	}
}

// metricsRun is the component in one form, taking metrics: the connector's metrics->metrics
// instance, or the processor in a metrics pipeline (whose next consumer gets the metrics it passes
// on, kept in passed, and the window results, kept in results).
type metricsRun struct {
	t       *testing.T
	clk     *clock.Fake
	consume func(context.Context, pmetric.Metrics) error
	comp    component.Component
	results *consumertest.MetricsSink
	passed  *consumertest.MetricsSink
	split   *splitter
	tel     *componenttest.Telemetry
	errs    []error
}

// splitter hands what the processor passes on (the batch being sent) to passed, and the window
// results to results.
type splitter struct {
	results, passed *consumertest.MetricsSink
	mu              sync.Mutex
	sending         pmetric.Metrics
}

func (sp *splitter) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	sp.mu.Lock()
	passing := md == sp.sending
	sp.mu.Unlock()
	if passing {
		return sp.passed.ConsumeMetrics(ctx, md)
	}
	return sp.results.ConsumeMetrics(ctx, md)
}

func (*splitter) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// startMetrics starts cfg's component in form on host (nil: none), its wall clock at 1000 s.
func startMetrics(t *testing.T, form string, cfg *Config, host component.Host) *metricsRun {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if host == nil {
		host = componenttest.NewNopHost()
	}
	clk, ok := testClocks.Load(t)
	if !ok {
		clk = useFakeClock(t)
	}
	r := &metricsRun{t: t, clk: clk.(*clock.Fake), results: new(consumertest.MetricsSink), passed: new(consumertest.MetricsSink),
		tel: componenttest.NewTelemetry()}
	ctx := testContext(t)
	switch form {
	case "connector":
		set := connectortest.NewNopSettings(Type)
		set.TelemetrySettings = r.tel.NewTelemetrySettings()
		c, err := NewConnectorFactory().CreateMetricsToMetrics(ctx, set, cfg, r.results)
		must(t, err)
		r.comp, r.consume = c, c.ConsumeMetrics
	default:
		set := processortest.NewNopSettings(Type)
		set.TelemetrySettings = r.tel.NewTelemetrySettings()
		r.split = &splitter{results: r.results, passed: r.passed}
		p, err := NewFactory().CreateMetrics(ctx, set, cfg, r.split)
		must(t, err)
		r.comp, r.consume = p, p.ConsumeMetrics
	}
	must(t, r.comp.Start(ctx, host))
	t.Cleanup(r.stop)
	return r
}

// at sets the wall clock to sec seconds.
func (r *metricsRun) at(sec int64) { r.clk.Set(time.Unix(sec, 0)) }

// send hands a batch to the component and lets it emit what fired.
func (r *metricsRun) send(md pmetric.Metrics) {
	r.t.Helper()
	if r.split != nil {
		r.split.mu.Lock()
		r.split.sending = md
		r.split.mu.Unlock()
	}
	if err := r.consume(context.Background(), md); err != nil {
		r.errs = append(r.errs, err)
	}
	settleAll(r.t)
}

// stop shuts the component down (without storage, every open window fires).
func (r *metricsRun) stop() {
	if r.comp != nil {
		must(r.t, r.comp.Shutdown(context.Background()))
		r.comp = nil
	}
}

// points returns the result points so far.
func (r *metricsRun) points() []point { return points(r.results.AllMetrics()) }

// metricsConfig is baseConfig (10 s tumbling windows, delta points, late firings that revise) with
// aggregations aggs.
func metricsConfig(aggs ...AggregationConfig) *Config {
	cfg := baseConfig()
	cfg.Aggregations = aggs
	return cfg
}

// pointsCounter reads metric_points of an aggregation and outcome.
func pointsCounter(t *testing.T, tel *componenttest.Telemetry, agg, outcome string) int64 {
	t.Helper()
	return counterValue(t, tel, "otelcol_window_aggregator_metric_points", map[string]string{"aggregation": agg, "outcome": outcome})
}
