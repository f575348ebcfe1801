package windowaggregator

import (
	"context"
	"errors"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottldatapoint"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/processor/sketch"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// Metrics: the signal, and all of the component that knows pmetric as input: the walk that shows the
// core each data point of the metrics an aggregation names, through the record view; what a point
// adds (datapoints.go, with the input streams of inputstreams.go); the removal of the points taken
// (drop_aggregated_input); and the instances that take metrics. A late metric point is counted and
// dropped: the connector's metrics output carries window results only.

var metricSignal = &signal{name: "metrics", input: inputMetrics, record: "value", fields: []string{"metric.name"},
	points: true, ottl: newMetricOTTL}

// The special keys of metrics, by index in metricSignal.fields.
const fieldMetricName = 0

// metricReader is the record view of one data point at a time, with what the aggregations make of it
// until the batch is applied: the distributions and sketches staged, and its tally.
type metricReader struct {
	record
	rm         pmetric.ResourceMetrics
	sm         pmetric.ScopeMetrics
	m          pmetric.Metric
	kind       pointKind
	cumulative bool
	// The point, in the field of its kind; refusal is pointAggregated, or why no aggregation takes it
	// (a summary, no recorded value).
	num     pmetric.NumberDataPoint
	hist    pmetric.HistogramDataPoint
	exp     pmetric.ExponentialHistogramDataPoint
	summary pmetric.SummaryDataPoint
	refusal pointOutcome
	tctx    *ottldatapoint.TransformContext

	// The identity of the point's stream, by part, computed when a cumulative stream first asks.
	hasher                 identityHasher
	resID, scopeID, nameID identity
	resOK, scopeOK, nameOK bool
	key                    streamKey
	keyOK                  bool
	imported               bool // cur is the point's sketch (see pointSketch)
	// countsRead: counts holds an explicit point's bucket counts; boundsHashed: bounds is the hash
	// of its bounds (see readCounts, boundsHash); faultRead: fault is what breaks the data model in
	// the point (see explicitFault, exponentialFault)
	countsRead, boundsHashed, faultRead bool
	bounds                              uint64
	fault                               histogramFault
	cur                                 *sketch.Histogram // nil: none
	counts, diff                        []uint64          // buffers for bucket counts
	// The distributions staged in this call, and their bucket counts: slabs that the reader keeps
	// (while the pool does), so that a batch of histograms allocates a few slabs, not a
	// distribution and its counts per point.
	dists                   [][]stream.Distribution
	bucketSlab              []uint64
	sketches                []*sketch.Histogram
	usedDists, usedSketches int
	// tally counts what the aggregations made of the call's points, by aggregation index.
	tally []pointTally
}

// pointTally is one aggregation's counts of one call, for metric_points, input_resets and
// incompatible_histograms (by reason).
type pointTally struct {
	outcomes     [numPointOutcomes]int64
	resets       int64
	incompatible [numHistogramFaults]int64
}

var metricReaders = sync.Pool{New: func() any {
	rd := new(metricReader)
	rd.src = rd
	return rd
}}

// maxPooledSketches bounds the sketches a pooled reader keeps: a batch of many exponential points
// must not leave all of theirs behind.
const maxPooledSketches = 256

func getMetricReader(aggs int) *metricReader {
	rd := metricReaders.Get().(*metricReader)
	if cap(rd.tally) < aggs {
		rd.tally = make([]pointTally, aggs)
	}
	rd.tally = rd.tally[:aggs]
	return rd
}

func (rd *metricReader) release() {
	rd.closeContext()
	rd.clear()
	rd.rm, rd.sm, rd.m = pmetric.ResourceMetrics{}, pmetric.ScopeMetrics{}, pmetric.Metric{}
	rd.num, rd.hist, rd.exp, rd.summary = pmetric.NumberDataPoint{}, pmetric.HistogramDataPoint{}, pmetric.ExponentialHistogramDataPoint{}, pmetric.SummaryDataPoint{}
	rd.cur, rd.imported = nil, false
	for i := range rd.usedDists {
		d := &rd.dists[i/distSlab][i%distSlab]
		d.Sketch, d.Buckets = nil, nil
	}
	rd.bucketSlab = rd.bucketSlab[:0]
	rd.usedDists, rd.usedSketches = 0, 0
	if len(rd.sketches) > maxPooledSketches {
		clear(rd.sketches[maxPooledSketches:])
		rd.sketches = rd.sketches[:maxPooledSketches]
	}
	clear(rd.tally)
	metricReaders.Put(rd)
}

// distSlab and bucketSlabLen are the sizes of the slabs of distributions and of bucket counts.
const (
	distSlab      = 256
	bucketSlabLen = 4096
)

// newDist returns a distribution for a record staged in this call, with n bucket counts (nil for
// none).
func (rd *metricReader) newDist(n int) *stream.Distribution {
	if rd.usedDists == len(rd.dists)*distSlab {
		rd.dists = append(rd.dists, make([]stream.Distribution, distSlab))
	}
	d := &rd.dists[rd.usedDists/distSlab][rd.usedDists%distSlab]
	rd.usedDists++
	*d = stream.Distribution{}
	if n > 0 {
		if len(rd.bucketSlab)+n > cap(rd.bucketSlab) {
			// A new slab: the counts already handed out stay in the old one until Apply.
			rd.bucketSlab = make([]uint64, 0, max(bucketSlabLen, n))
		}
		d.Buckets = rd.bucketSlab[len(rd.bucketSlab) : len(rd.bucketSlab)+n]
		rd.bucketSlab = rd.bucketSlab[:len(rd.bucketSlab)+n]
	}
	return d
}

// scratchSketch returns a sketch that is the reader's until the call's batch is applied.
func (rd *metricReader) scratchSketch() *sketch.Histogram {
	if rd.usedSketches == len(rd.sketches) {
		rd.sketches = append(rd.sketches, sketch.New(sketch.DefaultScale, sketch.DefaultMaxBuckets))
	}
	h := rd.sketches[rd.usedSketches]
	rd.usedSketches++
	return h
}

// setResource points the view at the metrics of rm.
func (rd *metricReader) setResource(rm pmetric.ResourceMetrics) {
	rd.rm, rd.resOK = rm, false
}

// setScope points the view at the metrics of sm.
func (rd *metricReader) setScope(sm pmetric.ScopeMetrics) {
	rd.sm, rd.scopeOK = sm, false
	rd.record.setScope(sm.Scope().Attributes(), rd.rm.Resource().Attributes())
}

// setMetric points the view at the points of metric m.
func (rd *metricReader) setMetric(m pmetric.Metric) {
	rd.m, rd.nameOK = m, false
	rd.kind, rd.cumulative = kindOf(m)
	rd.field[fieldMetricName] = m.Name()
}

// point readies the view for another point, with attributes attrs, at Timestamp t; noValue: it is
// flagged as having no recorded value.
func (rd *metricReader) point(attrs pcommon.Map, t uint64, noValue bool) int64 {
	if rd.tctx != nil {
		rd.closeContext()
	}
	rd.next(attrs)
	rd.keyOK, rd.imported, rd.cur = false, false, nil
	rd.countsRead, rd.boundsHashed, rd.faultRead = false, false, false
	rd.refusal = pointAggregated
	switch {
	case rd.kind == pointSummary:
		rd.refusal = pointSummaryOutcome
	case noValue:
		rd.refusal = pointNoRecordedValue
	}
	return timeOf(t)
}

// streamKey returns the key of the point's input stream.
func (rd *metricReader) streamKey() streamKey {
	if rd.keyOK {
		return rd.key
	}
	h := &rd.hasher
	if !rd.resOK {
		rd.resID, rd.resOK = h.hashMap(rd.rm.Resource().Attributes()), true
	}
	if !rd.scopeOK {
		sc := rd.sm.Scope()
		rd.scopeID, rd.scopeOK = h.hashScope(sc.Name(), sc.Version(), sc.Attributes()), true
	}
	if !rd.nameOK {
		rd.nameID, rd.nameOK = h.hashName(rd.m.Name()), true
	}
	rd.key, rd.keyOK = h.key(rd.resID, rd.scopeID, rd.nameID, h.hashMap(rd.attrs)), true
	return rd.key
}

func (rd *metricReader) weightSeed() uint64 { return 0 } // metric points weigh 1, or their count

// context returns the point's OTTL transform context, made on first use.
func (rd *metricReader) context() *ottldatapoint.TransformContext {
	if rd.tctx == nil {
		var dp any
		switch rd.kind {
		case pointHistogram:
			dp = rd.hist
		case pointExponential:
			dp = rd.exp
		case pointSummary:
			dp = rd.summary
		default:
			dp = rd.num
		}
		rd.tctx = ottldatapoint.NewTransformContext(rd.rm, rd.sm, rd.m, dp)
	}
	return rd.tctx
}

func (rd *metricReader) closeContext() {
	if rd.tctx != nil {
		rd.tctx.Close()
		rd.tctx = nil
	}
}

// newMetricOTTL returns the parser of metrics aggregations' OTTL: the datapoint context, with path
// context names (datapoint., metric., resource., scope.) and the standard converters.
func newMetricOTTL(set component.TelemetrySettings) (ottlParser, error) {
	p, err := ottldatapoint.NewParser(ottlfuncs.StandardConverters[*ottldatapoint.TransformContext](), set, ottldatapoint.EnablePathContextNames())
	return &contextParser[*ottldatapoint.TransformContext]{p: p, contextOf: func(r *record) *ottldatapoint.TransformContext {
		return r.src.(*metricReader).context()
	}}, err
}

// ingestMetrics aggregates the data points of md's metrics that some aggregation names; with drop it
// removes from md the points that an aggregation took. The points of the component's own scope (its
// results, or another window_aggregator's) are never taken. err is an OTTL error with error_mode
// propagate.
func (s *shared) ingestMetrics(ctx context.Context, md pmetric.Metrics, action lateAction, drop bool) error {
	sa := &s.bySignal[inputMetrics]
	if len(sa.aggs) == 0 {
		return nil
	}
	in := s.inputs
	rd := getMetricReader(len(s.aggs))
	in.gate.RLock()
	run := s.beginRun(ctx, &rd.record)
	in.mu.Lock()
	in.sweep(run.b.Watermark(), int64(s.cfg.SeriesExpiration))
	walkTaken(md, sa, func(rm pmetric.ResourceMetrics) {
		run.setSource(rm.Resource().Attributes())
		rd.setResource(rm)
	}, rd.setScope, func(m pmetric.Metric, aggs []*aggregation) {
		rd.setMetric(m)
		rd.stagePoints(run, aggs, in)
	})
	in.mu.Unlock()
	run.apply()
	in.gate.RUnlock()
	if drop {
		removeTaken(md, sa, run.sc.state)
	}
	s.reportPoints(ctx, rd.tally)
	err := run.finish(ctx, action)
	rd.release()
	return err
}

// walkTaken calls resource, scope and metric for the parts of md whose metrics some aggregation of
// sa names (with those aggregations), in order, skipping the component's own scope.
func walkTaken(md pmetric.Metrics, sa *signalAggs, resource func(pmetric.ResourceMetrics), scope func(pmetric.ScopeMetrics),
	metric func(pmetric.Metric, []*aggregation)) {
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
func (rd *metricReader) stagePoints(run *ingestRun, aggs []*aggregation, in *metricInputs) {
	switch m := rd.m; rd.kind {
	case pointValue, pointIncrease, pointCounter:
		var dps pmetric.NumberDataPointSlice
		if m.Type() == pmetric.MetricTypeSum {
			dps = m.Sum().DataPoints()
		} else {
			dps = m.Gauge().DataPoints()
		}
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			rd.num = dp
			run.stagePoint(rd, aggs, in, rd.point(dp.Attributes(), uint64(dp.Timestamp()), dp.Flags().NoRecordedValue()))
		}
	case pointHistogram:
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			rd.hist = dp
			run.stagePoint(rd, aggs, in, rd.point(dp.Attributes(), uint64(dp.Timestamp()), dp.Flags().NoRecordedValue()))
		}
	case pointExponential:
		dps := m.ExponentialHistogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			rd.exp = dp
			run.stagePoint(rd, aggs, in, rd.point(dp.Attributes(), uint64(dp.Timestamp()), dp.Flags().NoRecordedValue()))
		}
	case pointSummary:
		dps := m.Summary().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			rd.summary = dp
			run.stagePoint(rd, aggs, in, rd.point(dp.Attributes(), uint64(dp.Timestamp()), dp.Flags().NoRecordedValue()))
		}
	}
}

// stagePoint runs the view's point, at event time t, through aggregations aggs: each that selects it
// adds what the point adds to it (see metricReader.add), staged as a record, unless the point's time
// is invalid or in the future, or it adds nothing. A point that its aggregations took without a
// record is held back (with drop_aggregated_input, removed as the aggregated ones are) or refused.
func (run *ingestRun) stagePoint(rd *metricReader, aggs []*aggregation, in *metricInputs, t int64) {
	rec := &run.rec
	rec.Time, rec.Tag = t, int32(len(run.sc.state))
	st := unmatched
	held, left := false, false
	for _, a := range aggs {
		if !a.matches(&rd.record) || len(a.conditions) > 0 && !run.anyCondition(a) {
			continue
		}
		tl := &rd.tally[a.index]
		if rd.refusal != pointAggregated {
			tl.outcomes[rd.refusal]++
			left = true
			continue
		}
		if st == unmatched {
			if check := run.b.Check(t); check != stream.OnTime {
				st = outcomeOf(check) // future or invalid: taken by no aggregation, its streams unmoved
				break
			}
		}
		add := rd.add(a, in)
		tl.outcomes[add.outcome]++
		if add.reset {
			tl.resets++
		}
		tl.incompatible[add.fault]++ // histogramFits is not reported
		if add.outcome != pointStreamLimit {
			in.byAgg[a.index].learn(rd.m.Unit(), rd.kind == pointIncrease || rd.kind == pointCounter)
		}
		if add.outcome != pointAggregated {
			held = held || add.outcome.held()
			left = left || !add.outcome.held()
			continue
		}
		if st == unmatched {
			st = outcomeOf(stream.OnTime)
			if t > run.now {
				run.tl.aheadOfClock++ // aggregated, but W does not follow it past the clock
			}
		}
		var truncated bool
		if a.computed {
			truncated = run.buildComputedKey(a)
		} else {
			truncated = a.buildKey(&run.sc.key, &rd.record)
		}
		if truncated {
			run.tl.truncated++
		}
		if add.why != valueOK {
			run.sc.faults = append(run.sc.faults, fault{rec.Tag, add.why, weightOK})
		}
		rec.Agg, rec.Key = a.index, run.sc.key.Key()
		if add.dist != nil {
			run.b.StageDistribution(rec, add.dist)
			continue
		}
		rec.Value, rec.Weight = add.value, add.weight
		run.b.StageChecked(rec)
	}
	if st == unmatched {
		switch {
		case held:
			st = heldBack
		case left:
			st = refused
		}
	}
	run.sc.state = append(run.sc.state, st)
}

// removeTaken removes from md the points that an aggregation took, by their outcomes (state, in the
// order walkTaken visits them): those aggregated, on time or late updates, and those held back.
// Scopes and resources left empty by it go too.
func removeTaken(md pmetric.Metrics, sa *signalAggs, state []outcome) {
	n := 0
	taken := func() bool {
		st := state[n]
		n++
		return st == outcomeOf(stream.OnTime) || st == outcomeOf(stream.LateUpdate) || st == heldBack
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
		m.Gauge().DataPoints().RemoveIf(func(pmetric.NumberDataPoint) bool { return remove() })
		left = m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		m.Sum().DataPoints().RemoveIf(func(pmetric.NumberDataPoint) bool { return remove() })
		left = m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		m.Histogram().DataPoints().RemoveIf(func(pmetric.HistogramDataPoint) bool { return remove() })
		left = m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		m.ExponentialHistogram().DataPoints().RemoveIf(func(pmetric.ExponentialHistogramDataPoint) bool { return remove() })
		left = m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		m.Summary().DataPoints().RemoveIf(func(pmetric.SummaryDataPoint) bool { return remove() })
		left = m.Summary().DataPoints().Len()
	}
	return removed && left == 0
}

// reportPoints adds one call's point tallies to the counters.
func (s *shared) reportPoints(ctx context.Context, tally []pointTally) {
	for i := range tally {
		t := &tally[i]
		a := s.aggs[i]
		for o, n := range t.outcomes {
			if n > 0 {
				s.tel.WindowAggregatorMetricPoints.Add(ctx, n, a.pointOptions[o]...)
			}
		}
		if t.resets > 0 {
			s.tel.WindowAggregatorInputResets.Add(ctx, t.resets, a.aggregationOption...)
		}
		for f := histogramFits + 1; f < numHistogramFaults; f++ {
			if n := t.incompatible[f]; n > 0 {
				s.tel.WindowAggregatorIncompatibleHistograms.Add(ctx, n, a.incompatibleOptions[f]...)
			}
		}
	}
}

// The instances that take metrics: the connector's metrics->metrics instance aggregates and sends
// window results only; the processor aggregates its pipeline's metrics and passes them on (without
// the points taken, with drop_aggregated_input), the window results besides.

type metricsToMetrics struct{ instance }

func (c *metricsToMetrics) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return c.s.ingestMetrics(ctx, md, lateDropped, false)
}

type metricsProcessor struct {
	instance
	next consumer.Metrics
}

func (p *metricsProcessor) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	drop := p.s.cfg.DropAggregatedInput
	had := drop && md.DataPointCount() > 0
	if err := p.s.ingestMetrics(ctx, md, latePassed, drop); err != nil {
		return err // error_mode propagate: the batch is refused
	}
	if had && md.DataPointCount() == 0 {
		return nil // every point was taken
	}
	return p.next.ConsumeMetrics(ctx, md)
}

// Capabilities: removing the points taken changes the batch.
func (p *metricsProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: p.s.cfg.DropAggregatedInput}
}

var errDropInConnector = errors.New("drop_aggregated_input applies to the processor form only: the connector never passes its input on")

func createMetricsToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	if cfg.(*Config).DropAggregatedInput {
		return nil, errDropInConnector
	}
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &metricsToMetrics{newInstance(s, s.addSink(next, inputMetrics), inputMetrics, true)}, nil
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &metricsProcessor{instance: newInstance(s, s.addSink(next, inputAny), inputMetrics, false), next: next}, nil
}
