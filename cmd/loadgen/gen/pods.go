package gen

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Pods simulates the pods of some services exporting their metrics as an OpenTelemetry SDK does,
// cumulatively: each pod is a resource (service.name, k8s.pod.name) with a monotonic counter of the
// requests it served (RequestsMetric) and an explicit histogram of their durations in ms
// (DurationMetric, bounds DurationBounds), both counted from the pod's start (StartTimestamp), and
// reset when the pod restarts. It keeps the ledger of what an aggregator of its exports can know:
// the requests served after each pod's first export (Observed).
type Pods struct {
	cfg  PodsConfig
	rng  *rand.Rand
	pods []*pod
	// the ledgers, by service: what the pods served after their first export, and in all
	seen, served map[string]*ServiceTotals
}

// The metrics the pods export, and their duration histogram's bounds.
const (
	RequestsMetric = "http.server.requests"
	DurationMetric = "http.server.request.duration"
	AttrPod        = "k8s.pod.name"
)

// DurationBounds are the explicit bounds of DurationMetric, in ms.
var DurationBounds = []float64{10, 50, 100, 500}

// PodsConfig says what to simulate.
type PodsConfig struct {
	Services       int     // svc-1 … svc-N
	PodsPerService int     // pods of each service
	MaxRequests    int     // requests a pod serves between two exports: uniform in [0, MaxRequests]
	Restart        float64 // the probability that a pod restarts before an export
}

// Validate reports a configuration the pods cannot honour.
func (c PodsConfig) Validate() error {
	var p problems
	p.unless(c.Services >= 1, "services must be at least 1, got %d", c.Services)
	p.unless(c.PodsPerService >= 1, "pods must be at least 1, got %d", c.PodsPerService)
	p.unless(c.MaxRequests >= 0, "max requests must not be negative, got %d", c.MaxRequests)
	p.unless(c.Restart >= 0 && c.Restart <= 1, "restart must be a fraction in [0, 1], got %v", c.Restart) // NaN fails too
	return errors.Join(p...)
}

// ServiceTotals is what the pods of one service served after their first export: requests, and
// their durations as the histogram counts them (count, sum in ms, and per bound of DurationBounds
// then +Inf the requests at or below it, as Prometheus' le buckets count).
type ServiceTotals struct {
	Requests, DurationCount, DurationSum float64
	Buckets                              []float64
}

type pod struct {
	service, name string
	start         time.Time
	exported      bool
	requests      int64
	counts        []uint64 // by bucket of DurationBounds, and the overflow
	sum           float64
}

// NewPods returns pods started at start, drawing from rng.
func NewPods(cfg PodsConfig, start time.Time, rng *rand.Rand) (*Pods, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rng == nil {
		return nil, errors.New("gen: nil *rand.Rand")
	}
	p := &Pods{cfg: cfg, rng: rng, seen: map[string]*ServiceTotals{}, served: map[string]*ServiceTotals{}}
	for s := 1; s <= cfg.Services; s++ {
		svc := "svc-" + strconv.Itoa(s)
		for i := 1; i <= cfg.PodsPerService; i++ {
			p.pods = append(p.pods, &pod{service: svc, name: svc + "-pod-" + strconv.Itoa(i), start: start,
				counts: make([]uint64, len(DurationBounds)+1)})
		}
	}
	return p, nil
}

// Export returns every pod's points at now, one resource per pod; first, each pod serves its
// requests since its last export (and may restart before).
func (p *Pods) Export(now time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, pd := range p.pods {
		if pd.exported && p.rng.Float64() < p.cfg.Restart {
			pd.start, pd.requests, pd.sum = now.Add(-time.Millisecond), 0, 0
			clear(pd.counts)
		}
		s := p.serve(pd)
		ledger(p.served, pd.service).add(s)
		if pd.exported { // the first export only tells an aggregator where the pod's counts stand
			ledger(p.seen, pd.service).add(s)
		}
		pd.exported = true
		pd.appendTo(md, now)
	}
	return md
}

type served struct {
	n      int64
	sum    float64
	counts []uint64
}

// serve makes pod pd serve its requests since its last export.
func (p *Pods) serve(pd *pod) served {
	s := served{n: int64(p.rng.IntN(p.cfg.MaxRequests + 1)), counts: make([]uint64, len(DurationBounds)+1)}
	for range s.n {
		// A lognormal duration around 40 ms, in whole ms so that sums are exact.
		ms := math.Max(1, math.Round(math.Exp(math.Log(40)+0.8*p.rng.NormFloat64())))
		i := 0
		for i < len(DurationBounds) && ms > DurationBounds[i] {
			i++
		}
		s.counts[i]++
		s.sum += ms
	}
	pd.requests += s.n
	pd.sum += s.sum
	for i, c := range s.counts {
		pd.counts[i] += c
	}
	return s
}

// ledger returns the totals of service in l, made on first use.
func ledger(l map[string]*ServiceTotals, service string) *ServiceTotals {
	t := l[service]
	if t == nil {
		t = &ServiceTotals{Buckets: make([]float64, len(DurationBounds)+1)}
		l[service] = t
	}
	return t
}

// add counts requests s.
func (t *ServiceTotals) add(s served) {
	t.Requests += float64(s.n)
	t.DurationCount += float64(s.n)
	t.DurationSum += s.sum
	for i, c := range s.counts {
		for j := i; j < len(t.Buckets); j++ { // le buckets: a request counts in every bound above it
			t.Buckets[j] += float64(c)
		}
	}
}

// appendTo appends the pod's points at now to md.
func (pd *pod) appendTo(md pmetric.Metrics, now time.Time) {
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(AttrServiceName, pd.service)
	rm.Resource().Attributes().PutStr(AttrPod, pd.name)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ScopeName)
	start, ts := pcommon.NewTimestampFromTime(pd.start), pcommon.NewTimestampFromTime(now)

	reqs := sm.Metrics().AppendEmpty()
	reqs.SetName(RequestsMetric)
	reqs.SetUnit("{request}")
	sum := reqs.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetStartTimestamp(start)
	dp.SetTimestamp(ts)
	dp.SetIntValue(pd.requests)

	dur := sm.Metrics().AppendEmpty()
	dur.SetName(DurationMetric)
	dur.SetUnit("ms")
	h := dur.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := h.DataPoints().AppendEmpty()
	hp.SetStartTimestamp(start)
	hp.SetTimestamp(ts)
	hp.SetCount(uint64(pd.requests))
	hp.SetSum(pd.sum)
	hp.ExplicitBounds().FromRaw(DurationBounds)
	hp.BucketCounts().FromRaw(pd.counts)
}

// Observed returns, by service, what the pods served after each one's first export: what an
// aggregator counts that started after the pods (at a pod's first point it only sets a base).
func (p *Pods) Observed() map[string]ServiceTotals { return copyLedger(p.seen) }

// Served returns, by service, what the pods served in all: what an aggregator counts that started
// before them (a first point whose start it saw counts whole).
func (p *Pods) Served() map[string]ServiceTotals { return copyLedger(p.served) }

func copyLedger(l map[string]*ServiceTotals) map[string]ServiceTotals {
	out := make(map[string]ServiceTotals, len(l))
	for svc, t := range l {
		c := *t
		c.Buckets = append([]float64(nil), t.Buckets...)
		out[svc] = c
	}
	return out
}

// Points returns the data points of one Export.
func (p *Pods) Points() int { return 2 * len(p.pods) }
