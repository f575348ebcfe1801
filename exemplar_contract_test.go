package windowaggregator

// An independent test of the "Exemplars (v2)" section of the contract
// (../shared/design/contract.md), written from the contract alone. It drives the connector
// through its factory as the collector does and checks the exemplars of the histogram points and
// of the max gauge against expectations worked out by hand.

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// ecSpan is one span of the scenario.
type ecSpan struct {
	name    string
	service string
	end     time.Duration // offset of the end from t0
	dur     time.Duration
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
}

// ecPoint is what one histogram point of one series must hold: the spans it counts (cumulative:
// those added since the series' previous point) and its count.
type ecPoint struct {
	spans []string
	count uint64
}

// ecScenario returns the spans of the scenario, keyed by name, and the batches in call order.
//
// Windows are 1m tumbling, aligned to the epoch, t0 is a window start 30 minutes in the past (so
// the wall-clock clamp of W never matters). max_out_of_orderness 5s, allowed_lateness 2m.
//
//	call 1: w0 spans (a1 a2 a3, b1 b2)                 W at start: -inf       -> after: t0+25s
//	call 2: w1 spans (a4..a7, b3) and b4 in w2         W at start: t0+25s     -> after: t0+2m5s (w0, w1 fire)
//	call 3: aLate (w0, 100ms, the slowest of w0) and bLate (w1, 1ms): judged by W = t0+2m5s,
//	        within allowed_lateness of both windows: added, folded into the series' next point
//	call 4: a8 a9 (w2) and a10 (w3)                    W at start: t0+2m5s    -> after: t0+3m25s (w2 fires)
//	shutdown: w3 fires as it stands.
func ecScenario() (map[string]*ecSpan, [][]*ecSpan) {
	ms := time.Millisecond
	s := time.Second
	m := time.Minute
	mk := func(name, svc string, end, dur time.Duration) *ecSpan {
		return &ecSpan{name: name, service: svc, end: end, dur: dur}
	}
	batches := [][]*ecSpan{
		{
			mk("a1", "svcA", 10*s, 10*ms), mk("a2", "svcA", 20*s, 50*ms), mk("a3", "svcA", 30*s, 30*ms),
			mk("b1", "svcB", 15*s, 5*ms), mk("b2", "svcB", 25*s, 7*ms),
		},
		{
			mk("a4", "svcA", m+5*s, 20*ms), mk("a5", "svcA", m+15*s, 80*ms), mk("a6", "svcA", m+25*s, 40*ms),
			mk("a7", "svcA", m+35*s, 60*ms), mk("b3", "svcB", m+10*s, 15*ms),
			mk("b4", "svcB", 2*m+10*s, 9*ms),
		},
		{
			mk("aLate", "svcA", 40*s, 100*ms), mk("bLate", "svcB", m+30*s, 1*ms),
		},
		{
			mk("a8", "svcA", 2*m+20*s, 25*ms), mk("a9", "svcA", 2*m+40*s, 35*ms),
			mk("a10", "svcA", 3*m+30*s, 12*ms),
		},
	}
	all := map[string]*ecSpan{}
	n := byte(1)
	for _, b := range batches {
		for _, sp := range b {
			sp.traceID = pcommon.TraceID{0xec, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, n}
			sp.spanID = pcommon.SpanID{0x5a, n, 0, 0, 0, 0, 0, n}
			n++
			all[sp.name] = sp
		}
	}
	return all, batches
}

func ecTraces(t0 time.Time, spans []*ecSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	bySvc := map[string]ptrace.SpanSlice{}
	for _, sp := range spans {
		ss, ok := bySvc[sp.service]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", sp.service)
			ss = rs.ScopeSpans().AppendEmpty().Spans()
			bySvc[sp.service] = ss
		}
		s := ss.AppendEmpty()
		s.SetName("op")
		s.SetKind(ptrace.SpanKindServer)
		s.SetTraceID(sp.traceID)
		s.SetSpanID(sp.spanID)
		end := t0.Add(sp.end)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-sp.dur)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	}
	return td
}

// runExemplarScenario runs the scenario through the connector and returns the metrics it emitted.
func runExemplarScenario(t *testing.T, temporality Temporality, lateFirings LateFirings) (time.Time, []pmetric.Metrics) {
	t.Helper()
	t0 := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	_, batches := ecScenario()

	f := NewConnectorFactory()
	cfg := createDefaultConfig().(*Config)
	cfg.Window.Size = time.Minute
	cfg.Watermark.MaxOutOfOrderness = 5 * time.Second
	cfg.AllowedLateness = 2 * time.Minute
	cfg.Emit.Interval = time.Hour
	if temporality != "" {
		cfg.Temporality = temporality
	}
	if lateFirings != "" {
		cfg.LateFirings = lateFirings
	}
	cfg.Aggregations = []AggregationConfig{
		{ // exponential histogram, unit ms, at most 2 exemplars per point
			Name: "exp", Signal: "spans", GroupBy: keys("service.name"),
			Outputs:   []string{"count", "max", "histogram"},
			Exemplars: ExemplarsConfig{Enabled: true, MaxPerDataPoint: 2},
		},
		{ // explicit histogram, unit us, at most 3 exemplars per point
			Name: "expl", Signal: "spans", GroupBy: keys("service.name"), Unit: "us",
			Outputs: []string{"count", "max", "histogram"},
			Histogram: &HistogramConfig{Explicit: &ExplicitHistogramConfig{
				Buckets: []any{"5ms", "10ms", "25ms", "50ms", "100ms"},
			}},
			Exemplars: ExemplarsConfig{Enabled: true, MaxPerDataPoint: 3},
		},
		{ // exemplars disabled
			Name: "off", Signal: "spans", GroupBy: keys("service.name"),
			Outputs: []string{"count", "max", "histogram"},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}

	sink := new(consumertest.MetricsSink)
	ctx := context.Background()
	c, err := f.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(Type), cfg, sink)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatalf("start: %v", err)
	}
	for i, b := range batches {
		if err := c.ConsumeTraces(ctx, ecTraces(t0, b)); err != nil {
			t.Fatalf("ConsumeTraces call %d: %v", i+1, err)
		}
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	return t0, sink.AllMetrics()
}

// ecExemplar is an exemplar as emitted.
type ecExemplar struct {
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	value   float64
	ts      pcommon.Timestamp
}

func ecExemplars(es pmetric.ExemplarSlice) []ecExemplar {
	out := make([]ecExemplar, 0, es.Len())
	for i := 0; i < es.Len(); i++ {
		e := es.At(i)
		v := e.DoubleValue()
		if e.ValueType() == pmetric.ExemplarValueTypeInt {
			v = float64(e.IntValue())
		}
		out = append(out, ecExemplar{e.TraceID(), e.SpanID(), v, e.Timestamp()})
	}
	return out
}

// ecPointData is one emitted data point of interest.
type ecPointData struct {
	service   string
	start, ts pcommon.Timestamp
	count     uint64
	value     float64 // gauges
	exemplars []ecExemplar
}

// collect returns the data points of the metric name, by service, in timestamp order.
func ecCollect(t *testing.T, all []pmetric.Metrics, name string) map[string][]ecPointData {
	t.Helper()
	out := map[string][]ecPointData{}
	svcOf := func(attrs pcommon.Map) string {
		v, ok := attrs.Get("service.name")
		if !ok {
			t.Errorf("%s: data point without the group_by attribute service.name: %v", name, attrs.AsRaw())
			return ""
		}
		return v.Str()
	}
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			sms := md.ResourceMetrics().At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					m := ms.At(k)
					if m.Name() != name {
						continue
					}
					switch m.Type() {
					case pmetric.MetricTypeExponentialHistogram:
						dps := m.ExponentialHistogram().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							s := svcOf(dp.Attributes())
							out[s] = append(out[s], ecPointData{s, dp.StartTimestamp(), dp.Timestamp(), dp.Count(), 0, ecExemplars(dp.Exemplars())})
						}
					case pmetric.MetricTypeHistogram:
						dps := m.Histogram().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							s := svcOf(dp.Attributes())
							out[s] = append(out[s], ecPointData{s, dp.StartTimestamp(), dp.Timestamp(), dp.Count(), 0, ecExemplars(dp.Exemplars())})
						}
					case pmetric.MetricTypeGauge:
						dps := m.Gauge().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							s := svcOf(dp.Attributes())
							out[s] = append(out[s], ecPointData{s, dp.StartTimestamp(), dp.Timestamp(), 0, dp.DoubleValue(), ecExemplars(dp.Exemplars())})
						}
					case pmetric.MetricTypeSum:
						dps := m.Sum().DataPoints()
						for p := 0; p < dps.Len(); p++ {
							dp := dps.At(p)
							s := svcOf(dp.Attributes())
							out[s] = append(out[s], ecPointData{s, dp.StartTimestamp(), dp.Timestamp(), uint64(dp.IntValue()), 0, ecExemplars(dp.Exemplars())})
						}
					default:
						t.Errorf("%s: unexpected metric type %s", name, m.Type())
					}
				}
			}
		}
	}
	for s, pts := range out {
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].ts < pts[j].ts })
		for i := 1; i < len(pts); i++ {
			if pts[i].ts == pts[i-1].ts {
				t.Errorf("%s %s: two points with timestamp %s (the contract: no point is ever emitted twice for the same series and timestamp)",
					name, s, pts[i].ts.AsTime().UTC())
			}
		}
	}
	return out
}

func ecName(all map[string]*ecSpan, e ecExemplar) string {
	for n, sp := range all {
		if sp.traceID == e.traceID && sp.spanID == e.spanID {
			return n
		}
	}
	return fmt.Sprintf("<unknown %s/%s>", e.traceID, e.spanID)
}

// checkExemplarsOf checks that every exemplar is one of the spans of want (ids, value in the
// unit, timestamp = span end), none twice, that there are min(len(want), max) of them, and that
// the slowest span of want is among them.
func checkExemplarsOf(t *testing.T, where string, t0 time.Time, all map[string]*ecSpan, got []ecExemplar, want []string, max int, unit time.Duration) {
	t.Helper()
	in := map[string]bool{}
	for _, n := range want {
		in[n] = true
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range got {
		n := ecName(all, e)
		names = append(names, n)
		sp, ok := all[n]
		switch {
		case !ok || !in[n]:
			t.Errorf("%s: exemplar %s is not a span counted in this point (want one of %v)", where, n, want)
			continue
		case seen[n]:
			t.Errorf("%s: exemplar %s appears twice", where, n)
		}
		seen[n] = true
		if wantV := float64(sp.dur) / float64(unit); e.value != wantV {
			t.Errorf("%s: exemplar %s value %v, want %v (the duration in the unit)", where, n, e.value, wantV)
		}
		if wantTS := pcommon.NewTimestampFromTime(t0.Add(sp.end)); e.ts != wantTS {
			t.Errorf("%s: exemplar %s timestamp %s, want the span end %s", where, n, e.ts.AsTime().UTC(), wantTS.AsTime().UTC())
		}
	}
	wantN := min(len(want), max)
	if len(got) != wantN {
		t.Errorf("%s: %d exemplars %v, want %d (min of the %d spans %v and max_per_data_point %d)",
			where, len(got), names, wantN, len(want), want, max)
	}
	if len(want) > 0 {
		slowest := want[0]
		for _, n := range want {
			if all[n].dur > all[slowest].dur {
				slowest = n
			}
		}
		if !seen[slowest] {
			t.Errorf("%s: the slowest span %s is not among the exemplars %v", where, slowest, names)
		}
	}
}

// checkExemplarScenario checks the emitted metrics against the expected histogram points.
func checkExemplarScenario(t *testing.T, t0 time.Time, all []pmetric.Metrics, expect map[string]map[time.Duration]ecPoint, cumulative bool) {
	t.Helper()
	spans, _ := ecScenario()
	ts := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }

	// The max gauge: one exemplar, the slowest span of the whole window; the late span is not in
	// a re-emitted gauge (the corrected gauges of a fired window are not re-emitted).
	wantMax := map[string]map[time.Duration]string{
		"svcA": {time.Minute: "a2", 2 * time.Minute: "a5", 3 * time.Minute: "a9", 4 * time.Minute: "a10"},
		"svcB": {time.Minute: "b2", 2 * time.Minute: "b3", 3 * time.Minute: "b4"},
	}

	for _, agg := range []struct {
		name string
		max  int
		unit time.Duration
	}{{"exp", 2, time.Millisecond}, {"expl", 3, time.Microsecond}} {
		hist := ecCollect(t, all, agg.name+".histogram")
		for svc, byEnd := range expect {
			pts := hist[svc]
			got := map[pcommon.Timestamp]ecPointData{}
			for _, p := range pts {
				got[p.ts] = p
			}
			for end, want := range byEnd {
				where := fmt.Sprintf("%s.histogram %s @t0+%s", agg.name, svc, end)
				p, ok := got[ts(end)]
				if !ok {
					t.Errorf("%s: no point", where)
					continue
				}
				if p.count != want.count {
					t.Errorf("%s: count %d, want %d", where, p.count, want.count)
				}
				wantStart := ts(end - time.Minute)
				if cumulative {
					wantStart = ts(0)
				}
				if p.start != wantStart {
					t.Errorf("%s: start %s, want %s", where, p.start.AsTime().UTC(), wantStart.AsTime().UTC())
				}
				checkExemplarsOf(t, where, t0, spans, p.exemplars, want.spans, agg.max, agg.unit)
			}
			// Points not listed (a cumulative point at a window end without new data, or a delta
			// point of an empty slide) have no spans added, so no exemplars.
			for _, p := range pts {
				if _, listed := byEnd[p.ts.AsTime().Sub(t0)]; listed {
					continue
				}
				where := fmt.Sprintf("%s.histogram %s @t0+%s (no new spans)", agg.name, svc, p.ts.AsTime().Sub(t0))
				checkExemplarsOf(t, where, t0, spans, p.exemplars, nil, agg.max, agg.unit)
			}
		}

		maxes := ecCollect(t, all, agg.name+".max")
		for svc, byEnd := range wantMax {
			got := map[pcommon.Timestamp]ecPointData{}
			for _, p := range maxes[svc] {
				got[p.ts] = p
			}
			for end, slowest := range byEnd {
				where := fmt.Sprintf("%s.max %s @t0+%s", agg.name, svc, end)
				p, ok := got[ts(end)]
				if !ok {
					t.Errorf("%s: no point", where)
					continue
				}
				if wantV := float64(spans[slowest].dur) / float64(agg.unit); p.value != wantV {
					t.Errorf("%s: value %v, want %v", where, p.value, wantV)
				}
				if len(p.exemplars) != 1 {
					var names []string
					for _, e := range p.exemplars {
						names = append(names, ecName(spans, e))
					}
					t.Errorf("%s: %d exemplars %v, want exactly one (%s)", where, len(p.exemplars), names, slowest)
					if len(p.exemplars) == 0 {
						continue
					}
				}
				checkExemplarsOf(t, where, t0, spans, p.exemplars[:1], []string{slowest}, 1, agg.unit)
			}
			for _, p := range maxes[svc] {
				if _, listed := byEnd[p.ts.AsTime().Sub(t0)]; !listed {
					t.Errorf("%s.max %s: unexpected point @t0+%s (a window without data, or a re-emitted gauge)",
						agg.name, svc, p.ts.AsTime().Sub(t0))
				}
			}
		}
	}

	// Exemplars disabled: none anywhere, on any of its outputs.
	for _, out := range []string{"count", "max", "histogram"} {
		pts := ecCollect(t, all, "off."+out)
		if len(pts) == 0 {
			t.Errorf("off.%s: no points at all", out)
		}
		for svc, ps := range pts {
			for _, p := range ps {
				if len(p.exemplars) != 0 {
					t.Errorf("off.%s %s @t0+%s: %d exemplars with exemplars disabled", out, svc, p.ts.AsTime().Sub(t0), len(p.exemplars))
				}
			}
		}
	}
	// And no exemplars on the count output of the enabled aggregations either.
	for _, agg := range []string{"exp", "expl"} {
		for svc, ps := range ecCollect(t, all, agg+".count") {
			for _, p := range ps {
				if len(p.exemplars) != 0 {
					t.Errorf("%s.count %s: exemplars on a count point (the contract puts them on histogram and max only)", agg, svc)
				}
			}
		}
	}
}

// TestExemplarContractDeltaFold: temporality delta, late_firings fold. Each histogram point holds
// the records of one slide; a late record's delta appears in the series' next point, and so may its
// exemplar.
func TestExemplarContractDeltaFold(t *testing.T) {
	t0, all := runExemplarScenario(t, "delta", "fold")
	m := time.Minute
	expect := map[string]map[time.Duration]ecPoint{
		"svcA": {
			1 * m: {[]string{"a1", "a2", "a3"}, 3},
			2 * m: {[]string{"a4", "a5", "a6", "a7"}, 4},
			3 * m: {[]string{"aLate", "a8", "a9"}, 3}, // aLate (w0, late) folds into the next slide
			4 * m: {[]string{"a10"}, 1},               // fired at shutdown
		},
		"svcB": {
			1 * m: {[]string{"b1", "b2"}, 2},
			2 * m: {[]string{"b3"}, 1},
			3 * m: {[]string{"b4", "bLate"}, 2}, // bLate (w1, late) folds into the next slide
		},
	}
	checkExemplarScenario(t, t0, all, expect, false)
}

// TestExemplarContractCumulative: the default temporality (cumulative) and late_firings (fold).
// Counts are running totals; a point's exemplars are only the spans added since the series'
// previous point.
func TestExemplarContractCumulative(t *testing.T) {
	t0, all := runExemplarScenario(t, "", "")
	m := time.Minute
	expect := map[string]map[time.Duration]ecPoint{
		"svcA": {
			1 * m: {[]string{"a1", "a2", "a3"}, 3},
			2 * m: {[]string{"a4", "a5", "a6", "a7"}, 7},
			3 * m: {[]string{"aLate", "a8", "a9"}, 10},
			4 * m: {[]string{"a10"}, 11},
		},
		"svcB": {
			1 * m: {[]string{"b1", "b2"}, 2},
			2 * m: {[]string{"b3"}, 3},
			3 * m: {[]string{"b4", "bLate"}, 5},
			// @4m, if emitted (the series lives): count 5, no new spans, no exemplars; checked by
			// the "not listed" rule.
		},
	}
	checkExemplarScenario(t, t0, all, expect, true)
	// The unlisted svcB point at 4m, if there is one, must keep the count at 5.
	for _, agg := range []string{"exp", "expl"} {
		for _, p := range ecCollect(t, all, agg+".histogram")["svcB"] {
			if p.ts.AsTime().Sub(t0) > 3*m && p.count != 5 {
				t.Errorf("%s.histogram svcB @t0+%s: count %d, want 5 (a running total without new records)", agg, p.ts.AsTime().Sub(t0), p.count)
			}
		}
	}
}
