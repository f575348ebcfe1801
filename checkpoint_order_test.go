package windowaggregator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// gatedStorage is memStorage whose writes (Set, and Batch, which a checkpoint is written with) can be
// made to wait, as a file storage's write and fsync do.
type gatedStorage struct {
	*memStorage
	block   atomic.Bool
	entered chan struct{} // a blocked Set has begun
	release chan struct{} // lets it go on
	done    atomic.Int64  // Sets that have returned
}

func (g *gatedStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return g, nil
}

func (g *gatedStorage) Set(ctx context.Context, k string, v []byte) error {
	if g.block.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	defer g.done.Add(1)
	return g.memStorage.Set(ctx, k, v)
}

func (g *gatedStorage) Batch(ctx context.Context, ops ...*storage.Operation) error {
	if g.block.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	defer g.done.Add(1)
	return g.memStorage.Batch(ctx, ops...)
}

// gatedConsumer records, for each request, how many checkpoints had been written when it came; its
// first request waits until released, as a slow backend does.
type gatedConsumer struct {
	st      *gatedStorage
	mu      sync.Mutex
	calls   []int64 // per request: Sets returned by then
	first   sync.Once
	entered chan struct{}
	release chan struct{}
	got     chan struct{}
}

func (c *gatedConsumer) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	c.calls = append(c.calls, c.st.done.Load())
	c.mu.Unlock()
	c.first.Do(func() {
		c.entered <- struct{}{}
		<-c.release
	})
	c.got <- struct{}{}
	return nil
}

func (c *gatedConsumer) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// The delivery goroutine, busy with an earlier request, goes on to a batch that the checkpoint being
// written holds, before the storage has taken that checkpoint: a kill -9 then restarts from the one
// before, which fires the window again, with other values.
func TestNoDeliveryBeforeTheCheckpointIsWritten(t *testing.T) {
	useFakeClock(t)
	st := &gatedStorage{memStorage: &memStorage{data: map[string][]byte{}}, entered: make(chan struct{}), release: make(chan struct{})}
	next := &gatedConsumer{st: st, entered: make(chan struct{}), release: make(chan struct{}), got: make(chan struct{}, 10)}
	cfg := latencyConfig()
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = 0
	h := newHarnessOn(t, cfg, false, next, hostWith{storageID: st})
	consume := func(specs ...spanSpec) { must(t, h.traces[0](context.Background(), traces(specs...))) }
	wait := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// [0,10) fires; its checkpoint is written; its delivery waits in the consumer.
	consume(spanSpec{service: "a", name: "/x", end: 1, ms: 1}, spanSpec{service: "a", name: "/x", end: 16, ms: 1})
	wait(next.entered, "the first delivery")
	// [10,20) fires; the checkpoint that holds it waits in Set.
	st.block.Store(true)
	consume(spanSpec{service: "a", name: "/x", end: 26, ms: 1})
	wait(st.entered, "the second checkpoint's Set")
	close(next.release) // the backend answers the first request
	wait(next.got, "the first request to return")
	st.block.Store(false)
	close(st.release) // the storage takes the second checkpoint
	wait(next.got, "the second request")
	// Each request notes how many checkpoints had been written when it came: the second must come
	// after the second checkpoint, not while it was being written.
	next.mu.Lock()
	calls := append([]int64(nil), next.calls...)
	next.mu.Unlock()
	if len(calls) != 2 || calls[0] < 1 || calls[1] < 2 {
		t.Errorf("a batch went out while the checkpoint holding it was still being written (checkpoints written at each request: %v)", calls)
	}
}

// While saves fail, the state is not durable: results go out without waiting for a checkpoint (as when
// the storage cannot be opened), and the failure is counted; once a save succeeds, delivery waits for
// checkpoints again.
func TestFailedSaveDeliversWithoutDurability(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	cfg := latencyConfig()
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = 0
	h := newHarnessOn(t, cfg, false, new(consumertest.MetricsSink), hostWith{storageID: st})
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1}))
	st.mu.Lock()
	st.failSet = errors.New("disk full")
	st.mu.Unlock()
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 16, ms: 1})) // [0,10) fires
	if n := len(h.metrics.AllMetrics()); n != 1 {
		t.Errorf("%d requests delivered while saves fail, want the 1 of [0,10)", n)
	}
	wantCounter(t, h.tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "save_failed"}, 1)
	if lookup(t).storage.Durable() {
		t.Error("durable while saves fail")
	}
	st.mu.Lock()
	st.failSet = nil
	st.mu.Unlock()
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 26, ms: 1})) // [10,20) fires, its save succeeds
	if n := len(h.metrics.AllMetrics()); n != 2 {
		t.Errorf("%d requests delivered after saves recovered, want 2", n)
	}
	if !lookup(t).storage.Durable() {
		t.Error("not durable after a save succeeded")
	}
	st.mu.Lock()
	saved := st.data[checkpoint.Key]
	st.mu.Unlock()
	if len(saved) == 0 {
		t.Error("no checkpoint after saves recovered")
	}
}
