// Package gen builds the spans and logs that the load generator sends: which services and series
// they belong to, their attributes, and their event times relative to an injected "now", with a
// configurable share of late, too-late, future and timestamp-less records, and an optional warm-up
// during which every record is on time.
//
// All randomness comes from the *rand.Rand handed to New, so a batch is a pure function of the
// configuration, the seed, the sequence of calls and the times passed in.
package gen

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Kind says how a record's event time was chosen.
type Kind int

const (
	// OnTime records are stamped now minus a jitter in [0, OutOfOrder).
	OnTime Kind = iota
	// Late records are stamped LateBy before now (minus the same jitter): within allowed lateness.
	Late
	// TooLate records are stamped TooLateBy before now (minus the jitter): past allowed lateness.
	TooLate
	// Future records are stamped FutureBy after now (plus the jitter).
	Future
	// Invalid records carry no timestamp at all.
	Invalid
	// NumKinds is the number of kinds.
	NumKinds
)

var kindNames = [NumKinds]string{"on-time", "late", "too-late", "future", "invalid"}

func (k Kind) String() string {
	if k >= 0 && k < NumKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Counts holds a number of records per Kind.
type Counts [NumKinds]int64

// Total is the sum over all kinds.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	for i, v := range o {
		c[i] += v
	}
}

// Attribute keys and fixed values the generator writes.
const (
	AttrServiceName = "service.name"
	AttrMethod      = "http.request.method"
	AttrRoute       = "http.route"
	AttrStatusCode  = "http.response.status_code"
	AttrBodySize    = "body.size"
	// AttrKind is set on every record to its Kind's name, so that a collector's output (and the
	// tests) can tell which records were meant to be late.
	AttrKind = "loadgen.kind"
	// ScopeName is the instrumentation scope of every record.
	ScopeName = "github.com/windowaggregator/windowaggregator/cmd/loadgen"
)

// Distribution parameters.
const (
	// SpanMedian and SpanSigma shape the lognormal span duration.
	SpanMedian = 40 * time.Millisecond
	SpanSigma  = 0.6
	// ErrorShare is the share of spans that answer 500 with status ERROR.
	ErrorShare = 0.05
	// BodyMedian and BodySigma shape the lognormal body.size of logs, in bytes.
	BodyMedian = 1024.0
	BodySigma  = 1.0
)

// Config says what to generate. Fractions are shares of all records; the rest are on time.
type Config struct {
	Services int // distinct service.name values, svc-1 … svc-N
	Series   int // distinct span names per service

	OutOfOrder time.Duration // on-time event times are now minus a jitter in [0, OutOfOrder)

	// WarmUp is how long, from the now of the first batch, every record is on time whatever the
	// shares below say. A freshly started collector has no watermark yet, so everything in its first
	// batches is on time, late or not; the warm-up lets those batches set the watermark from now,
	// so that the first late record is judged against it. 0: no warm-up.
	WarmUp time.Duration

	Late      float64
	LateBy    time.Duration
	TooLate   float64
	TooLateBy time.Duration
	Future    float64
	FutureBy  time.Duration
	Invalid   float64
}

// Validate reports a configuration the generator cannot honour.
func (c Config) Validate() error {
	var p problems
	p.unless(c.Services >= 1, "services must be at least 1, got %d", c.Services)
	p.unless(c.Series >= 1, "series must be at least 1, got %d", c.Series)
	p.unless(c.OutOfOrder >= 0, "out-of-order must not be negative, got %v", c.OutOfOrder)
	for _, f := range []struct {
		name string
		v    float64
	}{{"late", c.Late}, {"too-late", c.TooLate}, {"future", c.Future}, {"invalid", c.Invalid}} {
		p.unless(f.v >= 0 && f.v <= 1, "%s must be a fraction in [0, 1], got %v", f.name, f.v) // NaN fails too
	}
	sum := c.Late + c.TooLate + c.Future + c.Invalid
	p.unless(sum <= 1+1e-9, "late + too-late + future + invalid must not exceed 1, got %v", sum)
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"late-by", c.LateBy}, {"too-late-by", c.TooLateBy}, {"future-by", c.FutureBy}, {"warm-up", c.WarmUp}} {
		p.unless(d.v >= 0, "%s must not be negative, got %v", d.name, d.v)
	}
	return errors.Join(p...)
}

// problems are what a Validate found wrong.
type problems []error

// unless adds a problem, as format says, unless ok.
func (p *problems) unless(ok bool, format string, args ...any) {
	if !ok {
		*p = append(*p, fmt.Errorf(format, args...))
	}
}

// Generator builds batches of spans and logs. It is not safe for concurrent use.
type Generator struct {
	cfg      Config
	rng      *rand.Rand
	services []string
	names    []string // span name per series index
	methods  []string
	routes   []string

	started   bool      // a batch has been built
	warm      bool      // the warm-up is on: from the first batch until one at or past warmUntil
	warmUntil time.Time // the first batch's now plus WarmUp
}

// New returns a generator drawing from rng.
func New(cfg Config, rng *rand.Rand) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, errors.New("gen: nil *rand.Rand")
	}
	g := &Generator{cfg: cfg, rng: rng}
	for i := 1; i <= cfg.Services; i++ {
		g.services = append(g.services, "svc-"+strconv.Itoa(i))
	}
	for j := 1; j <= cfg.Series; j++ {
		// Alternate the method per series so that one span name always has one method.
		method := "GET"
		if j%2 == 0 {
			method = "POST"
		}
		route := "/api/item" + strconv.Itoa(j)
		g.methods = append(g.methods, method)
		g.routes = append(g.routes, route)
		g.names = append(g.names, method+" "+route)
	}
	return g, nil
}

// Config returns the configuration the generator was built with.
func (g *Generator) Config() Config { return g.cfg }

// SeriesCount is the number of distinct (service, span name) pairs: Services × Series.
func (g *Generator) SeriesCount() int { return g.cfg.Services * g.cfg.Series }

// WarmingUp reports whether a batch built at now would hold on-time records only. Before the
// first batch it is true unless WarmUp is 0.
func (g *Generator) WarmingUp(now time.Time) bool {
	if !g.started {
		return g.cfg.WarmUp > 0
	}
	return g.warm && now.Before(g.warmUntil)
}

// begin is called at the start of every batch: the first one starts the warm-up, the first one at
// or past its end ends it for good (a clock stepping back later does not bring it back). It returns
// whether the batch is within the warm-up.
func (g *Generator) begin(now time.Time) bool {
	if !g.started {
		g.started, g.warm, g.warmUntil = true, true, now.Add(g.cfg.WarmUp)
	}
	g.warm = g.WarmingUp(now)
	return g.warm
}

// kind draws a record's kind by the configured shares; during the warm-up every record is on time
// and nothing is drawn.
func (g *Generator) kind(warm bool) Kind {
	if warm {
		return OnTime
	}
	u := g.rng.Float64()
	c := g.cfg
	switch {
	case u < c.Invalid:
		return Invalid
	case u < c.Invalid+c.Future:
		return Future
	case u < c.Invalid+c.Future+c.TooLate:
		return TooLate
	case u < c.Invalid+c.Future+c.TooLate+c.Late:
		return Late
	}
	return OnTime
}

func (g *Generator) jitter() time.Duration {
	if g.cfg.OutOfOrder <= 0 {
		return 0
	}
	return time.Duration(g.rng.Int64N(int64(g.cfg.OutOfOrder)))
}

// eventTime returns the event time of a record of kind k relative to now, and false for Invalid.
func (g *Generator) eventTime(now time.Time, k Kind) (time.Time, bool) {
	j := g.jitter()
	switch k {
	case Late:
		return now.Add(-g.cfg.LateBy - j), true
	case TooLate:
		return now.Add(-g.cfg.TooLateBy - j), true
	case Future:
		return now.Add(g.cfg.FutureBy + j), true
	case Invalid:
		return time.Time{}, false
	}
	return now.Add(-j), true
}

// lognormal draws exp(ln(median) + sigma·N(0,1)).
func (g *Generator) lognormal(median, sigma float64) float64 {
	return median * math.Exp(sigma*g.rng.NormFloat64())
}

// spanDuration draws one span duration; it is always at least one microsecond.
func (g *Generator) spanDuration() time.Duration {
	d := time.Duration(g.lognormal(float64(SpanMedian), SpanSigma))
	return max(d, time.Microsecond)
}

// series draws a (service, series) pair uniformly.
func (g *Generator) series() (svc, s int) {
	i := g.rng.IntN(g.cfg.Services * g.cfg.Series)
	return i / g.cfg.Series, i % g.cfg.Series
}

func (g *Generator) traceID() pcommon.TraceID {
	var id pcommon.TraceID
	for i := 0; i < len(id); i += 8 {
		putUint64(id[i:], g.rng.Uint64()|1) // never all zero
	}
	return id
}

func (g *Generator) spanID() pcommon.SpanID {
	var id pcommon.SpanID
	putUint64(id[:], g.rng.Uint64()|1)
	return id
}

func putUint64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// Spans returns n server spans, grouped by service into one ResourceSpans each, and how many of
// each kind it holds. A span's event time is its end time. During the warm-up all are on time.
func (g *Generator) Spans(now time.Time, n int) (ptrace.Traces, Counts) {
	warm := g.begin(now)
	td := ptrace.NewTraces()
	var counts Counts
	spans := perService(g.cfg.Services, func(svc int) ptrace.SpanSlice {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(AttrServiceName, g.services[svc])
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(ScopeName)
		return ss.Spans()
	})
	for range n {
		svc, s := g.series()
		k := g.kind(warm)
		counts[k]++
		sp := spans(svc).AppendEmpty()
		sp.SetTraceID(g.traceID())
		sp.SetSpanID(g.spanID())
		sp.SetName(g.names[s])
		sp.SetKind(ptrace.SpanKindServer)
		dur := g.spanDuration()
		if end, ok := g.eventTime(now, k); ok {
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-dur)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
		}
		attrs := sp.Attributes()
		attrs.PutStr(AttrMethod, g.methods[s])
		attrs.PutStr(AttrRoute, g.routes[s])
		code := int64(200)
		if g.rng.Float64() < ErrorShare {
			code = 500
			sp.Status().SetCode(ptrace.StatusCodeError)
			sp.Status().SetMessage("internal server error")
		}
		attrs.PutInt(AttrStatusCode, code)
		attrs.PutStr(AttrKind, k.String())
	}
	return td, counts
}

// perService returns the record list of a service of n, made by newList for the service's first
// record: each service's records under a resource of their own.
func perService[L any](n int, newList func(svc int) L) func(svc int) L {
	lists, made := make([]L, n), make([]bool, n)
	return func(svc int) L {
		if !made[svc] {
			lists[svc], made[svc] = newList(svc), true
		}
		return lists[svc]
	}
}

var severities = []struct {
	text   string
	number plog.SeverityNumber
	upTo   float64 // cumulative share
}{
	{"INFO", plog.SeverityNumberInfo, 0.80},
	{"WARN", plog.SeverityNumberWarn, 0.95},
	{"ERROR", plog.SeverityNumberError, 1},
}

// Logs returns n log records, grouped by service into one ResourceLogs each, and how many of each
// kind it holds. A record's event time is its timestamp; its observed timestamp is now, except for
// Invalid records, which have neither. During the warm-up all are on time.
func (g *Generator) Logs(now time.Time, n int) (plog.Logs, Counts) {
	warm := g.begin(now)
	ld := plog.NewLogs()
	var counts Counts
	records := perService(g.cfg.Services, func(svc int) plog.LogRecordSlice {
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr(AttrServiceName, g.services[svc])
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName(ScopeName)
		return sl.LogRecords()
	})
	for range n {
		svc, s := g.series()
		k := g.kind(warm)
		counts[k]++
		lr := records(svc).AppendEmpty()
		if ts, ok := g.eventTime(now, k); ok {
			lr.SetTimestamp(pcommon.NewTimestampFromTime(ts))
			lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(now))
		}
		u := g.rng.Float64()
		sev := severities[len(severities)-1]
		for _, c := range severities {
			if u < c.upTo {
				sev = c
				break
			}
		}
		lr.SetSeverityText(sev.text)
		lr.SetSeverityNumber(sev.number)
		lr.Body().SetStr(g.names[s] + " handled")
		size := max(int64(math.Round(g.lognormal(BodyMedian, BodySigma))), 1)
		attrs := lr.Attributes()
		attrs.PutInt(AttrBodySize, size)
		attrs.PutStr(AttrRoute, g.routes[s])
		attrs.PutStr(AttrKind, k.String())
	}
	return ld, counts
}
