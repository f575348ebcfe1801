package windowaggregator

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
)

// A fuzz input read as a recipe: the shape and every field of a batch, chosen by the input's bytes,
// so that the fuzzer reaches what a client can send and a protobuf mutation seldom makes: bucket
// lists of any length, offsets and scales of any int32, counts of any uint64, values that are not
// set, NaN and infinite floats, timestamps of 0 and of the far future, attributes of every type.
// Past the input's end every choice is 0.

type recipe struct{ b []byte }

// next returns the recipe's next byte.
func (r *recipe) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// pick returns a choice in [0, n).
func (r *recipe) pick(n int) int { return int(r.next()) % n }

func (r *recipe) flag() bool { return r.next()&1 == 1 }

// raw64 returns the next eight bytes as a number.
func (r *recipe) raw64() uint64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = r.next()
	}
	return binary.LittleEndian.Uint64(buf[:])
}

// count is a small count, or any uint64.
func (r *recipe) count() uint64 {
	if c := r.next(); c < 0xf0 {
		return uint64(c % 16)
	}
	return r.raw64()
}

// i32 is a small int32 around 0, or any.
func (r *recipe) i32() int32 {
	if c := r.next(); c < 0xf0 {
		return int32(c%32) - 8
	}
	return int32(r.raw64())
}

// f64 is a small number, or any float64's bits (NaN, infinities and subnormals among them).
func (r *recipe) f64() float64 {
	switch c := r.next(); {
	case c < 0xe0:
		return float64(int(c%64)-16) / 4
	case c < 0xf0:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64,
			0, math.Copysign(0, -1), 1e300, 1e-300, 5e-324, math.MaxInt64, math.MinInt64, 2.5, 1 << 53, -1}[c-0xe0]
	}
	return math.Float64frombits(r.raw64())
}

// ts is a time within the windows the fuzz targets keep open (1000 to 1030 s), 0, or any.
func (r *recipe) ts() pcommon.Timestamp {
	switch c := r.next(); {
	case c < 0xe0:
		return pcommon.Timestamp((990 + int64(c%48)) * s)
	case c < 0xf0:
		return 0
	}
	return pcommon.Timestamp(r.raw64())
}

// str is one of a few names, or a string of the recipe's bytes.
func (r *recipe) str() string {
	if c := r.next(); c < 0xf0 {
		return []string{"", "a", "b", "x", "m", "n", "/x", "ot=th:c", "ot=th:8", "ot=th:zz", "1e20", "-3", "NaN", "GET", "k", "size"}[c%16]
	}
	n := min(int(r.next()), len(r.b))
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// value puts a value of any type into v, maps and slices nested up to depth.
func (r *recipe) value(v pcommon.Value, depth int) {
	switch r.pick(8) {
	case 0:
		v.SetStr(r.str())
	case 1:
		v.SetInt(int64(r.count()) - 4)
	case 2:
		v.SetDouble(r.f64())
	case 3:
		v.SetBool(r.flag())
	case 4:
		v.SetEmptyBytes().FromRaw([]byte(r.str()))
	case 5:
		if depth > 0 {
			r.attributes(v.SetEmptyMap(), depth-1)
		}
	case 6:
		if depth > 0 {
			sl := v.SetEmptySlice()
			for range r.pick(4) {
				r.value(sl.AppendEmpty(), depth-1)
			}
		}
	default: // empty
	}
}

// attributes puts a few attributes into m, under keys the fuzz targets' aggregations read and others.
func (r *recipe) attributes(m pcommon.Map, depth int) {
	for range r.pick(5) {
		r.value(m.PutEmpty(r.str()), depth)
	}
}

func (r *recipe) resource(res pcommon.Resource) {
	res.Attributes().PutStr("service.name", r.str())
	r.attributes(res.Attributes(), 1)
}

// fuzzBounds are the bounds of the fuzz targets' explicit histogram output.
var fuzzBounds = []float64{0.1, 0.5, 1, 5}

// metrics builds a batch of metrics: names among m and n (which the targets aggregate) and others,
// every kind, temporality and field free.
func (r *recipe) metrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	for range 1 + r.pick(3) {
		rm := md.ResourceMetrics().AppendEmpty()
		r.resource(rm.Resource())
		for range 1 + r.pick(2) {
			sm := rm.ScopeMetrics().AppendEmpty()
			if r.pick(8) == 0 {
				sm.Scope().SetName(metadata.ScopeName) // results: never input
			}
			for range 1 + r.pick(4) {
				r.metric(sm.Metrics().AppendEmpty())
			}
		}
	}
	return md
}

func (r *recipe) temporality() pmetric.AggregationTemporality {
	return pmetric.AggregationTemporality(r.pick(3))
}

func (r *recipe) metric(m pmetric.Metric) {
	m.SetName([]string{"m", "n", "other"}[r.pick(3)])
	m.SetUnit(r.str())
	points := 1 + r.pick(4)
	switch r.pick(8) {
	case 0:
		dps := m.SetEmptyGauge().DataPoints()
		for range points {
			r.number(dps.AppendEmpty())
		}
	case 1:
		sum := m.SetEmptySum()
		sum.SetIsMonotonic(r.flag())
		sum.SetAggregationTemporality(r.temporality())
		for range points {
			r.number(sum.DataPoints().AppendEmpty())
		}
	case 2, 3:
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(r.temporality())
		for range points {
			r.histogram(h.DataPoints().AppendEmpty())
		}
	case 4, 5:
		h := m.SetEmptyExponentialHistogram()
		h.SetAggregationTemporality(r.temporality())
		for range points {
			r.exponential(h.DataPoints().AppendEmpty())
		}
	case 6:
		dps := m.SetEmptySummary().DataPoints()
		for range points {
			dp := dps.AppendEmpty()
			r.common(dp.Attributes(), dp.SetStartTimestamp, dp.SetTimestamp, dp.SetFlags)
			dp.SetCount(r.count())
			dp.SetSum(r.f64())
		}
	default: // a metric of no type
	}
}

// common sets what every point has: attributes, times and flags (no recorded value, in one of
// eight).
func (r *recipe) common(attrs pcommon.Map, start, ts func(pcommon.Timestamp), flags func(pmetric.DataPointFlags)) {
	r.attributes(attrs, 1)
	start(r.ts())
	ts(r.ts())
	if r.pick(8) == 0 {
		flags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	}
}

func (r *recipe) number(dp pmetric.NumberDataPoint) {
	r.common(dp.Attributes(), dp.SetStartTimestamp, dp.SetTimestamp, dp.SetFlags)
	switch r.pick(3) {
	case 0: // no value set
	case 1:
		dp.SetIntValue(int64(r.count()) - 4)
	default:
		dp.SetDoubleValue(r.f64())
	}
}

func (r *recipe) histogram(dp pmetric.HistogramDataPoint) {
	r.common(dp.Attributes(), dp.SetStartTimestamp, dp.SetTimestamp, dp.SetFlags)
	nb := r.pick(6)
	for i := range nb {
		switch {
		case r.pick(4) == 0:
			dp.ExplicitBounds().Append(r.f64())
		case i < len(fuzzBounds):
			dp.ExplicitBounds().Append(fuzzBounds[i]) // the explicit output's, as a client's
		default:
			dp.ExplicitBounds().Append(float64(10 * i))
		}
	}
	nc := nb + 1
	if r.pick(4) == 0 {
		nc = r.pick(9)
	}
	var total uint64
	for range nc {
		c := r.count()
		total += c
		dp.BucketCounts().Append(c)
	}
	r.head(total, dp.SetCount, dp.SetSum, dp.SetMin, dp.SetMax)
}

func (r *recipe) exponential(dp pmetric.ExponentialHistogramDataPoint) {
	r.common(dp.Attributes(), dp.SetStartTimestamp, dp.SetTimestamp, dp.SetFlags)
	dp.SetScale(r.i32())
	dp.SetZeroCount(r.count())
	dp.SetZeroThreshold(r.f64())
	total := dp.ZeroCount()
	for _, b := range []pmetric.ExponentialHistogramDataPointBuckets{dp.Positive(), dp.Negative()} {
		b.SetOffset(r.i32())
		for range r.pick(7) {
			c := r.count()
			total += c
			b.BucketCounts().Append(c)
		}
	}
	r.head(total, dp.SetCount, dp.SetSum, dp.SetMin, dp.SetMax)
}

// head sets a histogram's count, mostly total (what its buckets add up to, wrapped as a client's
// uint64 sum wraps), and its sum, min and max or not.
func (r *recipe) head(total uint64, count func(uint64), sum, lo, hi func(float64)) {
	if r.pick(4) == 0 {
		total = r.count()
	}
	count(total)
	if r.pick(4) != 0 {
		sum(r.f64())
	}
	if r.flag() {
		lo(r.f64())
		hi(r.f64())
	}
}

// traces builds a batch of spans: ids, times, kinds, status, tracestates and attributes free.
func (r *recipe) traces() ptrace.Traces {
	td := ptrace.NewTraces()
	for range 1 + r.pick(3) {
		rs := td.ResourceSpans().AppendEmpty()
		r.resource(rs.Resource())
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(r.str())
		r.attributes(ss.Scope().Attributes(), 1)
		for range 1 + r.pick(6) {
			sp := ss.Spans().AppendEmpty()
			sp.SetName(r.str())
			var tr pcommon.TraceID
			var id pcommon.SpanID
			if r.flag() {
				binary.LittleEndian.PutUint64(tr[:], r.raw64())
				binary.LittleEndian.PutUint64(tr[8:], r.raw64())
				binary.LittleEndian.PutUint64(id[:], r.raw64())
			}
			sp.SetTraceID(tr)
			sp.SetSpanID(id)
			sp.SetKind(ptrace.SpanKind(r.i32()))
			sp.Status().SetCode(ptrace.StatusCode(r.i32()))
			sp.SetStartTimestamp(r.ts())
			sp.SetEndTimestamp(r.ts())
			sp.TraceState().FromRaw(r.str())
			r.attributes(sp.Attributes(), 2)
		}
	}
	return td
}

// logs builds a batch of log records: times, severities, bodies, ids and attributes free.
func (r *recipe) logs() plog.Logs {
	ld := plog.NewLogs()
	for range 1 + r.pick(3) {
		rl := ld.ResourceLogs().AppendEmpty()
		r.resource(rl.Resource())
		sl := rl.ScopeLogs().AppendEmpty()
		for range 1 + r.pick(6) {
			lr := sl.LogRecords().AppendEmpty()
			lr.SetTimestamp(r.ts())
			lr.SetObservedTimestamp(r.ts())
			lr.SetSeverityNumber(plog.SeverityNumber(r.i32()))
			lr.SetSeverityText(r.str())
			r.value(lr.Body(), 2)
			if r.flag() {
				var tr pcommon.TraceID
				var id pcommon.SpanID
				binary.LittleEndian.PutUint64(tr[:], r.raw64())
				binary.LittleEndian.PutUint64(id[:], r.raw64())
				lr.SetTraceID(tr)
				lr.SetSpanID(id)
			}
			r.attributes(lr.Attributes(), 2)
		}
	}
	return ld
}

// withinTime runs fn, a call that takes records records, and fails the run if it has not returned
// within a bound far above what any batch needs (seconds, plus a millisecond a record): a hang, or
// work out of proportion to the input, stops the process with the stacks of every goroutine, which
// say where. If fn panics, abandon is called first: the component's locks may be held, and its
// Shutdown, in the test's cleanup, would wait for them forever instead of reporting the panic.
func withinTime(t *testing.T, records int, abandon func(), fn func()) {
	t.Helper()
	limit := 5*time.Second + time.Duration(records)*time.Millisecond
	name := t.Name()
	timer := time.AfterFunc(limit, func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		panic(fmt.Sprintf("%s: %d records not taken within %v:\n%s", name, records, limit, buf))
	})
	defer timer.Stop()
	defer func() {
		if p := recover(); p != nil {
			abandon()
			panic(p)
		}
	}()
	fn()
}
