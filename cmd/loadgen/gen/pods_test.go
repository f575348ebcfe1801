package gen

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The ledgers agree with the points: replayed pod by pod, every export's increase over the pod's last
// one (or the whole value when its start moved on: a restart) adds up to what Observed says, and with
// each pod's first value to what Served says.
func TestPodsLedgersMatchTheirPoints(t *testing.T) {
	start := time.Unix(1000, 0)
	p, err := NewPods(PodsConfig{Services: 3, PodsPerService: 3, MaxRequests: 20, Restart: 0.2}, start, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	lasts := map[string]*podPoint{}
	observed := map[string]ServiceTotals{}
	served := map[string]ServiceTotals{}
	restarts := 0
	for i := range 60 {
		md := p.Export(start.Add(time.Duration(i+1) * time.Second))
		if n := md.DataPointCount(); n != p.Points() {
			t.Fatalf("%d points, want %d", n, p.Points())
		}
		for r := 0; r < md.ResourceMetrics().Len(); r++ {
			rm := md.ResourceMetrics().At(r)
			svc, _ := rm.Resource().Attributes().Get(AttrServiceName)
			podName, _ := rm.Resource().Attributes().Get(AttrPod)
			ms := rm.ScopeMetrics().At(0).Metrics()
			c := ms.At(0).Sum().DataPoints().At(0)
			h := ms.At(1).Histogram().DataPoints().At(0)
			cur := &podPoint{start: uint64(c.StartTimestamp()), reqs: c.IntValue(), count: h.Count(), sum: h.Sum(), le: leCounts(h)}
			if cur.reqs != int64(cur.count) {
				t.Fatalf("%s: %d requests, histogram count %d", podName.Str(), cur.reqs, cur.count)
			}
			prev := lasts[podName.Str()]
			inc := *cur
			switch {
			case prev == nil:
			case cur.start != prev.start:
				restarts++
			default:
				inc.reqs, inc.sum = cur.reqs-prev.reqs, cur.sum-prev.sum
				inc.le = append([]float64(nil), cur.le...)
				for j := range inc.le {
					inc.le[j] -= prev.le[j]
				}
			}
			addTo(served, svc.Str(), inc)
			if prev != nil {
				addTo(observed, svc.Str(), inc)
			}
			lasts[podName.Str()] = cur
		}
	}
	if restarts == 0 {
		t.Fatal("no pod restarted")
	}
	if !reflect.DeepEqual(observed, p.Observed()) || !reflect.DeepEqual(served, p.Served()) {
		t.Fatalf("from the points: observed %v, served %v\nledgers: observed %v, served %v", observed, served, p.Observed(), p.Served())
	}
}

// leCounts are a histogram point's counts at or below each bound, then in all.
func leCounts(h pmetric.HistogramDataPoint) []float64 {
	out := make([]float64, h.BucketCounts().Len())
	var n float64
	for i, c := range h.BucketCounts().All() {
		n += float64(c)
		out[i] = n
	}
	return out
}

// podPoint is what a pod's export says: its start, requests, and its histogram's count, sum and le
// counts.
type podPoint struct {
	start uint64
	reqs  int64
	count uint64
	sum   float64
	le    []float64
}

// addTo adds the increase inc to service svc's totals in l.
func addTo(l map[string]ServiceTotals, svc string, inc podPoint) {
	t := l[svc]
	if t.Buckets == nil {
		t.Buckets = make([]float64, len(inc.le))
	}
	t.Requests += float64(inc.reqs)
	t.DurationCount += float64(inc.reqs)
	t.DurationSum += inc.sum
	for i, v := range inc.le {
		t.Buckets[i] += v
	}
	l[svc] = t
}
