package windowaggregator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// crashSink records every count point it takes, by series and timestamp, the checkpoint that storage
// held when each request came (what a restart after a kill -9 at that moment would restore), and the
// batch being ingested then.
type crashSink struct {
	st          *memStorage
	batch       *atomic.Int64
	mu          sync.Mutex
	values      []map[string]float64 // per request: series@timestamp -> value
	checkpoints []map[string][]byte  // per request: what the storage held (the checkpoint and its parts)
	batches     []int                // per request: the batch being ingested
}

func (c *crashSink) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkpoints = append(c.checkpoints, c.st.snapshot())
	c.batches = append(c.batches, int(c.batch.Load()))
	v := map[string]float64{}
	for _, p := range points([]pmetric.Metrics{md}) {
		if p.metric == "lat.count" {
			v[p.attrs+"@"+fmt.Sprint(p.end)] = p.value
		}
	}
	c.values = append(c.values, v)
	return nil
}

func (c *crashSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// A kill -9 at any delivery, then a restart from the checkpoint storage held at that moment, and the
// stream going on after the batch that was coming in (whose records, and those since the
// checkpoint, are lost): no point delivered before the crash is delivered again with another value,
// and no cumulative total goes back. The scheduled checkpoints come every five batches.
func TestCrashAtAnyDeliveryNeverChangesADeliveredValue(t *testing.T) {
	useFakeClock(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var stream [][]spanSpec // 40 batches over 20 windows, some spans late within the lateness
	for b := range 40 {
		var batch []spanSpec
		for range 5 {
			end := float64(5*b) + rng.Float64()*5
			if rng.IntN(4) == 0 {
				end -= 12 // late, within allowed_lateness 30 s
			}
			batch = append(batch, spanSpec{service: fmt.Sprint("s", rng.IntN(3)), name: "/x", end: max(end, 1), ms: 1})
		}
		stream = append(stream, batch)
	}
	cfg := outputModesConfig(temporalityCumulative, lateFold)
	cfg.Aggregations[0].Outputs = []string{"count"}
	cfg.Aggregations[0].Histogram = nil
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = 0 // the scheduled ones are taken below, every five batches
	run := func(sink *crashSink, from int) {
		h := newHarnessOn(t, cfg, false, sink, hostWith{storageID: sink.st})
		for b := from; b < len(stream); b++ {
			sink.batch.Store(int64(b))
			h.sendTraces(traces(stream[b]...))
			if b%5 == 4 {
				lookup(t).storage.Save(context.Background())
			}
		}
		h.shutdown()
	}
	first := &crashSink{st: &memStorage{data: map[string][]byte{}}, batch: new(atomic.Int64)}
	run(first, 0)
	if len(first.values) < 10 {
		t.Fatalf("only %d deliveries", len(first.values))
	}
	crashes := 0
	for k := range first.values {
		// Before the crash: what was delivered, and each series' latest total.
		was, latest := map[string]float64{}, map[string]float64{}
		for i := range k {
			for key, v := range first.values[i] {
				was[key] = v
				series := key[:strings.LastIndex(key, "@")]
				latest[series] = max(latest[series], v)
			}
		}
		second := &crashSink{st: &memStorage{data: map[string][]byte{}}, batch: new(atomic.Int64)}
		if cp := first.checkpoints[k]; len(cp[checkpoint.Key]) > 0 {
			second.st.data = cp
		}
		run(second, first.batches[k]+1)
		crashes++
		for _, v := range second.values {
			for key, val := range v {
				if w, ok := was[key]; ok && val != w {
					t.Fatalf("kill -9 at delivery %d (batch %d): %s delivered again as %v, was %v", k, first.batches[k], key, val, w)
				}
				if series := key[:strings.LastIndex(key, "@")]; len(first.checkpoints[k][checkpoint.Key]) > 0 && val < latest[series] {
					t.Fatalf("kill -9 at delivery %d (batch %d): %s total %v, below the %v delivered before", k, first.batches[k], key, val, latest[series])
				}
			}
		}
	}
	t.Logf("%d deliveries, a kill -9 at each", crashes)
}
