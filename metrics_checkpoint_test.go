package windowaggregator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
)

// A checkpoint taken while metric batches are ingested from several pipelines at once holds every
// stream's base together with the increases measured from it (the gate): restored, with every point
// sent again (those it holds are out of order, the others add their increases), it gives the true
// totals. A checkpoint that held a base without its increase would lose it; one that held an increase
// without its base would count it twice. Run under -race, it also shows that the tables are guarded.
func TestACheckpointTakenDuringMetricIngestIsConsistent(t *testing.T) {
	for trial := range 4 {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			useFakeClock(t) // 1000 s: the component starts watching; W stays at or below it, every point on time
			cfg := counterConfig()
			cfg.Temporality, cfg.LateFirings = temporalityCumulative, lateFold
			cfg.AllowedLateness, cfg.SeriesExpiration = time.Hour, time.Hour
			cfg.Storage, cfg.Checkpoint.Interval = &storageID, time.Hour
			rng := rand.New(rand.NewPCG(uint64(trial), 30))
			// 8 pods of 2 services, each a counter from 0 started at 1000 (after the component): its
			// last value is its whole increase.
			const pods, perPod = 8, 150
			batches := make([][]pmetric.Metrics, 4) // by pipeline, in each pod's order
			want := map[string]float64{}
			for p := range pods {
				svc := []string{"a", "b"}[p%2]
				v := 0.0
				for i := range perPod {
					v += float64(rng.IntN(10))
					batches[p%4] = append(batches[p%4], inMetrics(counter(svc, fmt.Sprint("p", p), 1000, int64(1001+i), v)))
				}
				want["service.name="+svc+"(Str)"] += v
			}
			st := &memStorage{data: map[string][]byte{}}
			host := hostWith{storageID: st}
			ctx := testContext(t)
			var procs []interface {
				ConsumeMetrics(context.Context, pmetric.Metrics) error
				Shutdown(context.Context) error
			}
			for range 4 {
				p, err := NewFactory().CreateMetrics(ctx, processortest.NewNopSettings(Type), cfg, consumertest.NewNop())
				must(t, err)
				must(t, p.Start(ctx, host))
				procs = append(procs, p)
			}
			s := lookup(t)
			var wg sync.WaitGroup
			done := make(chan struct{})
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, md := range batches[g] {
						must(t, procs[g].ConsumeMetrics(context.Background(), md))
					}
				}()
			}
			go func() { wg.Wait(); close(done) }()
			var mid map[string][]byte // what the storage held at a moment in the middle of the ingest
			for k := 0; ; k++ {
				s.storage.Save(context.Background())
				if k == 2+trial || mid == nil {
					mid = st.snapshot()
				}
				select {
				case <-done:
				default:
					continue
				}
				break
			}
			for _, p := range procs {
				must(t, p.Shutdown(context.Background()))
			}

			// Restored from the checkpoint of the middle, every point again, in each pod's order.
			st2 := &memStorage{data: mid}
			r := startMetrics(t, "processor", cfg, hostWith{storageID: st2})
			for g := range 4 {
				for _, md := range batches[g] {
					r.send(md)
				}
			}
			r.at(1500)
			r.send(inMetrics(counter("z", "z", 1400, 1490, 0))) // started since: whole, it moves W and fires every window
			r.stop()
			last := map[string]point{}
			for _, p := range find(r.points(), "reqs.sum", svcA) {
				last[p.attrs] = p
			}
			for _, p := range find(r.points(), "reqs.sum", svcB) {
				last[p.attrs] = p
			}
			for svc, w := range want {
				if got := last[svc].value; got != w {
					t.Errorf("%s: the last cumulative point is %v, the true total %v", svc, got, w)
				}
			}
			wantCounter(t, r.tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}, 1)
		})
	}
}
