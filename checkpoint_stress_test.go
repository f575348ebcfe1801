package windowaggregator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	for ; time.Now().Before(deadline); n++ {
		s.storage.save(context.Background())
		st.mu.Lock()
		cp := append([]byte(nil), st.data[checkpointKey]...)
		st.mu.Unlock()
		fresh, err := newShared(set.TelemetrySettings, set.ID, cfg, clk)
		must(t, err)
		if err := fresh.storage.decode(cp); err != nil {
			t.Fatalf("checkpoint %d (%d bytes): %v", n, len(cp), err)
		}
		fresh.tel.shutdown()
		if n%20 == 0 {
			t.Logf("checkpoint %d: %d bytes", n, len(cp))
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d checkpoints", n)
}

// A version 2 checkpoint (no service.instance.id) restores, under the collector's id.
func TestVersion2CheckpointRestoresUnderTheCollectorsID(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Storage = &storageID
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: []string{"service.name"}, Outputs: []string{"count"}}}
	st := &memStorage{data: map[string][]byte{}}
	run := func(collectorID string, specs ...spanSpec) ([]string, []point) {
		sink := new(consumertest.MetricsSink)
		set := connectortest.NewNopSettings(Type)
		set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
		set.Resource.Attributes().PutStr("service.instance.id", collectorID)
		c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, sink)
		must(t, err)
		must(t, c.Start(context.Background(), hostWith{storageID: st}))
		must(t, c.ConsumeTraces(context.Background(), traces(specs...)))
		settleAll(t)
		must(t, c.Shutdown(context.Background()))
		return resourcesOf(sink.AllMetrics()), points(sink.AllMetrics())
	}
	run("first", spanSpec{service: "a", name: "/x", end: 1, ms: 1}, spanSpec{service: "a", name: "/x", end: 2, ms: 1})
	// Rewrite the version 3 checkpoint as version 2: no instance field.
	v3 := st.data[checkpointKey]
	b := v3[len(checkpointMagic)+1 : len(v3)-4]
	fpLen, w := binary.Uvarint(b)
	fp := b[:w+int(fpLen)]
	b = b[w+int(fpLen):]
	idLen, w := binary.Uvarint(b)
	if id := string(b[w : w+int(idLen)]); id != "first" {
		t.Fatalf("checkpoint keeps instance %q", id)
	}
	rest := b[w+int(idLen):]
	v2 := append([]byte(checkpointMagic), 2)
	v2 = append(v2, fp...)
	v2 = append(v2, rest...)
	v2 = binary.LittleEndian.AppendUint32(v2, crc32.Checksum(v2, crc32c))
	st.data[checkpointKey] = v2
	res, ps := run("second", spanSpec{service: "a", name: "/x", end: 11, ms: 1})
	if want := "service.instance.id=second,service.name=a: lat.count"; len(res) == 0 || res[0] != want {
		t.Errorf("after a version 2 restore, output resources %v, want %q", res, want)
	}
	wantPoint(t, ps, "lat.count", "service.name=a(Str)", 0, 10, 2)
}
