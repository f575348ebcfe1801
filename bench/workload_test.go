package bench

// The workload: the pre-built batches the benchmarks feed (rings of span and log batches that are
// re-stamped lap by lap so that the event time keeps advancing) and the cache chilling before a batch
// (BENCH_COLD_BYTES), shared by all of them.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const (
	recordsPerBatch = 1000
	numServices     = 10
	numSpanNames    = 20
	// heapSeries is the number of distinct series of BenchmarkHeapPerSeries (all in one window).
	heapSeries = 100_000
)

var (
	methods    = []string{"GET", "POST", "PUT", "DELETE"}
	severities = []string{"INFO", "INFO", "INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARN", "ERROR"}
	spanNames  = func() []string {
		s := make([]string, numSpanNames)
		for i := range s {
			s[i] = fmt.Sprintf("/api/v1/resource-%02d/{id}", i)
		}
		return s
	}()
	serviceNames = func() []string {
		s := make([]string, numServices)
		for i := range s {
			s[i] = fmt.Sprintf("service-%02d", i)
		}
		return s
	}()

	// spansPerSecond is the event-time rate of the workload: every batch covers
	// recordsPerBatch/spansPerSecond seconds of event time (its slot, slotNanos long), and a 1m
	// tumbling window fires every slotsPerMinute batches. At the default, 1000 spans/s, a window
	// holds 75 spans per series, and the results of every window weigh heavily per span;
	// BENCH_SPANS_PER_SECOND=50000 is a busy collector, where a window holds 3750 spans per series.
	spansPerSecond            = envInt("BENCH_SPANS_PER_SECOND", 1000)
	slotNanos, slotsPerMinute = slotsFor(spansPerSecond)

	// ringLen is the number of pre-built batches a benchmark cycles through: one minute of event
	// time at the default rate (at most 60 batches at any rate). BENCH_RING overrides it, to check
	// that the once-per-lap timestamp shift does not distort the result.
	ringLen = envInt("BENCH_RING", min(slotsPerMinute, 60))

	// baseTime is slot 0: a minute boundary eventTimeBehind before the process started. The event
	// time must stay behind the wall clock: window_aggregator's watermark never runs ahead of the
	// clock (W = min(greatest accepted event time, now) - max_out_of_orderness), so spans stamped
	// after time.Now() would stop windows from firing and the benchmark would measure something
	// else. checkAllAggregated and checkFired fail a benchmark in which a span was ahead of the clock.
	baseTime = time.Now().Add(-eventTimeBehind).Truncate(time.Minute).UnixNano()
)

// eventTimeBehind is how far behind the wall clock the event time starts. A benchmark covers b.N
// slots of event time (1 s each at the default 1000 spans/s; runPairedProcs twice as many): 365 days
// is 31.5 million batches at that rate, far more than any benchmark here feeds (window_aggregator
// takes 50 to 200 µs a batch, so -benchtime 10s is some 200000 batches, 2.3 days of event time).
const eventTimeBehind = 365 * 24 * time.Hour

// maxFutureSkew is the largest skew the engine accepts (its limit is MaxInt64/256 ns, about 417
// days; 1000000h is refused when the connector is created).
const maxFutureSkew = 365 * 24 * time.Hour

// slotsFor returns the event time one batch covers at rate spans per second, and how many batches
// make a minute. The rate must give whole nanoseconds between spans and a whole number of batches
// per minute: 1000, 2000, 5000, 10000, 20000, 50000 and 100000 do; 150 or 3000 do not.
func slotsFor(rate int) (slotNanos int64, slotsPerMinute int) {
	slotNanos = int64(time.Second) * recordsPerBatch / int64(rate)
	if slotNanos*int64(rate) != int64(time.Second)*recordsPerBatch || slotNanos%recordsPerBatch != 0 ||
		int64(time.Minute)%slotNanos != 0 {
		panic(fmt.Sprintf("BENCH_SPANS_PER_SECOND=%d: %d spans per batch do not divide a minute evenly", rate, recordsPerBatch))
	}
	return slotNanos, int(int64(time.Minute) / slotNanos)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// latencyNanos returns a latency-like duration: lognormal, median 50 ms, sigma 1, clamped to
// [100 µs, 60 s].
func latencyNanos(rng *rand.Rand) int64 {
	ms := 50 * math.Exp(rng.NormFloat64())
	return int64(min(max(ms, 0.1), 60_000) * 1e6)
}

// ring is a set of pre-built batches, each stamped with an event-time slot; shifting a batch to a
// new slot rewrites its timestamps in place (the batches are never handed to anything that keeps
// them).
type ring struct {
	slot  []int64
	shift func(i int, d pcommon.Timestamp)
	touch func(i int) int // reads batch i's records, keys and values
	n     int
}

// setSlot moves batch i to event-time slot s.
func (r *ring) setSlot(i int, s int64) {
	if d := s - r.slot[i]; d != 0 {
		r.shift(i, pcommon.Timestamp(d*slotNanos))
		r.slot[i] = s
	}
}

// reset stamps batch i with slot i.
func (r *ring) reset() {
	for i := range r.slot {
		r.setSlot(i, int64(i))
	}
}

// traceRing is a ring of span batches: 1000 spans each, 10 services (one ResourceSpans each) x 20
// span names, http.request.method among 4 values, kind SERVER, latency-like durations, end
// timestamps spread over the batch's second. Each service has instances instances
// (service.instance.id), which take turns batch by batch: batch i comes from instance i%instances of
// every service.
type traceRing struct {
	ring
	batches []ptrace.Traces
	// weights are the spans each batch stands for, with sampled spans counted at their adjusted
	// counts; nil: recordsPerBatch each.
	weights []int64
}

// spansOf returns the spans batch i stands for.
func (r *traceRing) spansOf(i int) int64 {
	if r.weights == nil {
		return recordsPerBatch
	}
	return r.weights[i]
}

// Sampled spans: tracestates whose thresholds give whole adjusted counts, so that window_aggregator
// and span_metrics (which rounds at random) must count alike.
const (
	// sampledPerService: each service samples at one rate (th:8, c, e, 0: 2, 4, 8, 1), and its spans
	// share one tracestate, as when the SDK's sampler writes the threshold alone.
	sampledPerService = "per_service"
	// sampledPerTrace: every span's tracestate also holds its trace's randomness (rv), so that no two
	// are alike and each is parsed: the costliest case.
	sampledPerTrace = "per_trace"
)

var sampledThresholds = []struct {
	traceState string
	weight     int64
}{{"ot=th:8", 2}, {"ot=th:c", 4}, {"ot=th:e", 8}, {"ot=th:0", 1}}

// sampledTraceRing returns ring 0's batches (the same spans) with a tracestate on every span, as
// mode says.
func sampledTraceRing(mode string) *traceRing {
	return cachedRing(sampledRings, mode, func() *traceRing {
		r := newTraceRing(ringLen, 1, 1)
		r.weights = make([]int64, r.n)
		for i, td := range r.batches {
			rss := td.ResourceSpans()
			for s := 0; s < rss.Len(); s++ {
				spans := rss.At(s).ScopeSpans().At(0).Spans()
				for k := 0; k < spans.Len(); k++ {
					th := sampledThresholds[s%len(sampledThresholds)]
					ts := th.traceState
					if mode == sampledPerTrace {
						th = sampledThresholds[(s+k)%len(sampledThresholds)]
						tid := spans.At(k).TraceID()
						ts = fmt.Sprintf("%s;rv:%x", th.traceState, tid[9:16])
					}
					spans.At(k).TraceState().FromRaw(ts)
					r.weights[i] += th.weight
				}
			}
		}
		return r
	})
}

// newRing builds the n batches of a ring in order, batch i with build(slotStart, i) for slot i
// (slotStart is the slot's first nanosecond), and the ring that holds them at those slots. The caller
// sets shift and touch, which read the batches it keeps.
func newRing[T any](n int, build func(slotStart int64, i int) T) (ring, []T) {
	r := ring{slot: make([]int64, n), n: n}
	batches := make([]T, n)
	for i := range batches {
		batches[i] = build(baseTime+int64(i)*slotNanos, i)
		r.slot[i] = int64(i)
	}
	return r, batches
}

// recordTime is the timestamp of the k-th record of service s in the batch of slot slotStart: the
// records of the services interleave, evenly spaced over the slot.
func recordTime(slotStart int64, s, k int) int64 {
	return slotStart + int64(k*numServices+s)*(slotNanos/recordsPerBatch)
}

func newTraceRing(n int, seed uint64, instances int) *traceRing {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	tr := &traceRing{}
	tr.ring, tr.batches = newRing(n, func(slotStart int64, i int) ptrace.Traces {
		return buildSpanBatch(rng, slotStart, instances, i%instances)
	})
	tr.shift = func(i int, d pcommon.Timestamp) { shiftTraces(tr.batches[i], d) }
	tr.touch = func(i int) int { return touchTraces(tr.batches[i]) }
	return tr
}

// buildSpanBatch builds a batch of slot slotStart from instance inst (of instances) of every
// service; with one instance, service s's service.instance.id is service-ss-s.
// setRandomIDs gives sp a trace id and a span id of its own, drawn from rng, as every real span has.
func setRandomIDs(rng *rand.Rand, sp ptrace.Span) {
	var tid [16]byte
	var sid [8]byte
	for j := range tid {
		tid[j] = byte(rng.Uint32())
	}
	for j := range sid {
		sid[j] = byte(rng.Uint32())
	}
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
}

func buildSpanBatch(rng *rand.Rand, slotStart int64, instances, inst int) ptrace.Traces {
	td := ptrace.NewTraces()
	perService := recordsPerBatch / numServices
	for s := 0; s < numServices; s++ {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", serviceNames[s])
		ra.PutStr("service.instance.id", fmt.Sprintf("%s-%d", serviceNames[s], s*instances+inst))
		ra.PutStr("telemetry.sdk.language", "go")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
		spans := ss.Spans()
		spans.EnsureCapacity(perService)
		for k := 0; k < perService; k++ {
			sp := spans.AppendEmpty()
			setRandomIDs(rng, sp)
			sp.SetName(spanNames[rng.IntN(numSpanNames)])
			sp.SetKind(ptrace.SpanKindServer)
			end := recordTime(slotStart, s, k)
			sp.SetStartTimestamp(pcommon.Timestamp(end - latencyNanos(rng)))
			sp.SetEndTimestamp(pcommon.Timestamp(end))
			a := sp.Attributes()
			a.EnsureCapacity(3)
			a.PutInt("http.response.status_code", 200)
			a.PutStr("http.request.method", methods[rng.IntN(len(methods))])
			a.PutStr("url.scheme", "https")
		}
	}
	return td
}

// touchTraces reads every span's name and attributes, as decoding the batch would have written them.
func touchTraces(td ptrace.Traces) (n int) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				n += len(sp.Name()) + int(sp.EndTimestamp()&1)
				for key, v := range sp.Attributes().All() {
					n += int(key[0]) + len(v.Str())
				}
			}
		}
	}
	return n
}

// coldBytes is BENCH_COLD_BYTES: when set, the serial loop and BenchmarkPaired write a buffer of that
// many bytes (make it larger than the last-level cache) and then read the batch before every batch,
// untimed, so that each batch meets the component's state cold and its own data warm, as in a
// collector, where the receiver has just decoded the batch and much else has run since the last one.
var coldBytes = envInt("BENCH_COLD_BYTES", 0)

var (
	evictBuf []byte
	chilled  int // what chill read, kept so that the reads cannot be optimized away
)

// chill evicts the caches and warms batch i of r. The buffer is outside the Go heap where the system
// allows (see evictBuffer), so that it does not raise the garbage collector's heap goal.
func chill(r *ring, i int) {
	if len(evictBuf) != coldBytes {
		evictBuf = evictBuffer(coldBytes)
	}
	for k := 0; k < len(evictBuf); k += 64 {
		evictBuf[k]++
	}
	chilled += r.touch(i)
}

func shiftTraces(td ptrace.Traces, d pcommon.Timestamp) {
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				sp.SetStartTimestamp(sp.StartTimestamp() + d)
				sp.SetEndTimestamp(sp.EndTimestamp() + d)
				// A span of the next lap is another span, not a resend of this one (dedup): its id
				// moves with its time.
				sid := sp.SpanID()
				binary.BigEndian.PutUint64(sid[:], binary.BigEndian.Uint64(sid[:])+uint64(d))
				sp.SetSpanID(sid)
			}
		}
	}
}

// logRing is a ring of log batches: 1000 records each, 10 services, severity mostly INFO, a
// numeric http.response.body.size attribute.
type logRing struct {
	ring
	batches []plog.Logs
}

func newLogRing(n int, seed uint64) *logRing {
	rng := rand.New(rand.NewPCG(seed, 0x10c5))
	lr := &logRing{}
	lr.ring, lr.batches = newRing(n, func(slotStart int64, _ int) plog.Logs { return buildLogBatch(rng, slotStart) })
	lr.shift = func(i int, d pcommon.Timestamp) { shiftLogs(lr.batches[i], d) }
	return lr
}

func buildLogBatch(rng *rand.Rand, slotStart int64) plog.Logs {
	ld := plog.NewLogs()
	perService := recordsPerBatch / numServices
	for s := 0; s < numServices; s++ {
		rl := ld.ResourceLogs().AppendEmpty()
		ra := rl.Resource().Attributes()
		ra.PutStr("service.name", serviceNames[s])
		ra.PutStr("telemetry.sdk.language", "go")
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("go.opentelemetry.io/contrib/bridges/otelslog")
		recs := sl.LogRecords()
		recs.EnsureCapacity(perService)
		for k := 0; k < perService; k++ {
			r := recs.AppendEmpty()
			ts := recordTime(slotStart, s, k)
			r.SetTimestamp(pcommon.Timestamp(ts))
			r.SetObservedTimestamp(pcommon.Timestamp(ts + int64(time.Millisecond)))
			sev := severities[rng.IntN(len(severities))]
			r.SetSeverityText(sev)
			r.Body().SetStr("request served")
			a := r.Attributes()
			a.EnsureCapacity(2)
			a.PutStr("http.request.method", methods[rng.IntN(len(methods))])
			a.PutInt("http.response.body.size", int64(200*math.Exp(1.5*rng.NormFloat64())))
		}
	}
	return ld
}

func shiftLogs(ld plog.Logs, d pcommon.Timestamp) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			recs := sls.At(j).LogRecords()
			for k := 0; k < recs.Len(); k++ {
				r := recs.At(k)
				r.SetTimestamp(r.Timestamp() + d)
				r.SetObservedTimestamp(r.ObservedTimestamp() + d)
			}
		}
	}
}

// Rings are built once per process and re-stamped (reset) at the start of every benchmark run.
var (
	ringsMu      sync.Mutex
	traceRings   = map[[2]int]*traceRing{}
	sampledRings = map[string]*traceRing{}
	logRings     = map[int]*logRing{}
)

// traceRingFor returns the k-th trace ring (k: the goroutine of a parallel benchmark), one instance
// per service.
func traceRingFor(k int) *traceRing { return traceRingOf(k, 1) }

// traceRingOf returns the k-th trace ring whose services have instances instances each.
func traceRingOf(k, instances int) *traceRing {
	return cachedRing(traceRings, [2]int{k, instances}, func() *traceRing {
		return newTraceRing(ringLen, uint64(k)+1, instances)
	})
}

func logRingFor(k int) *logRing {
	return cachedRing(logRings, k, func() *logRing { return newLogRing(ringLen, uint64(k)+1) })
}

// cachedRing returns the ring of rings under key, built with build the first time, reset.
func cachedRing[K comparable, R interface{ reset() }](rings map[K]R, key K, build func() R) R {
	ringsMu.Lock()
	defer ringsMu.Unlock()
	r, ok := rings[key]
	if !ok {
		r = build()
		rings[key] = r
	}
	r.reset()
	return r
}
