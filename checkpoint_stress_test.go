package windowaggregator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
)

// Checkpoints saved back to back while several goroutines ingest (and the component's goroutines
// collect and deliver) all decode into a fresh state; under -race, the encode that lets go of the
// emitter's lock early shares nothing unguarded.
func TestCheckpointsDuringConcurrentIngest(t *testing.T) {
	clk := useFakeClock(t)
	cfg := latencyConfig()
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = time.Hour
	st := &memStorage{data: map[string][]byte{}}
	h := newHarnessOn(t, cfg, false, new(consumertest.MetricsSink), hostWith{storageID: st})
	s := lookup(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				now := float64(clk.Advance(time.Duration(rng.IntN(5))*time.Millisecond)) / 1e9
				var specs []spanSpec
				for range 1 + rng.IntN(20) {
					specs = append(specs, spanSpec{service: fmt.Sprint("s", rng.IntN(20)), name: fmt.Sprint("/", rng.IntN(10)),
						end: now - rng.Float64()*12, ms: rng.Float64() * 100})
				}
				must(t, h.traces[0](context.Background(), traces(specs...)))
			}
		}()
	}
	set := connectortest.NewNopSettings(Type)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	n := 0
	for ; n < 60; n++ {
		s.storage.Save(context.Background())
		st.mu.Lock()
		cp := append([]byte(nil), st.data[checkpoint.Key]...)
		st.mu.Unlock()
		fresh, err := newShared(set.TelemetrySettings, set.ID, cfg, clk)
		must(t, err)
		if err := fresh.storage.Restore(context.Background(), st, cp); err != nil { // the identities' parts are read from the storage
			t.Fatalf("checkpoint %d (%d bytes): %v", n, len(cp), err)
		}
		fresh.Reporter.Telemetry.Shutdown()
		if n%20 == 0 {
			t.Logf("checkpoint %d: %d bytes", n, len(cp))
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d checkpoints", n)
}
