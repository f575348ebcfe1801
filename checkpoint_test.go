package windowaggregator

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// memStorage is an in-memory storage extension.
type memStorage struct {
	component.StartFunc
	component.ShutdownFunc
	mu      sync.Mutex
	data    map[string][]byte
	failGet error
	failSet error
	// failOpen fails GetClient; panicOpen makes it panic, as a storage library may on a damaged file.
	failOpen  error
	panicOpen bool
}

func (m *memStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.panicOpen {
		panic("invalid page type: 0: 4")
	}
	if m.failOpen != nil {
		return nil, m.failOpen
	}
	return m, nil
}
func (m *memStorage) Get(_ context.Context, k string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failGet != nil {
		return nil, m.failGet
	}
	return m.data[k], nil
}
func (m *memStorage) Set(_ context.Context, k string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failSet != nil {
		return m.failSet
	}
	m.data[k] = append([]byte(nil), v...)
	return nil
}
func (m *memStorage) Delete(_ context.Context, k string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.data, k)
	return nil
}

// Batch applies the operations all or none, as file_storage does in one transaction.
func (m *memStorage) Batch(_ context.Context, ops ...*storage.Operation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failSet != nil {
		return m.failSet
	}
	for _, op := range ops {
		switch op.Type {
		case storage.Set:
			m.data[op.Key] = append([]byte(nil), op.Value...)
		case storage.Delete:
			delete(m.data, op.Key)
		case storage.Get:
			op.Value = m.data[op.Key]
		}
	}
	return nil
}
func (m *memStorage) Close(context.Context) error { return nil }

// snapshot is what the storage holds: the checkpoint's value and its identities' parts.
func (m *memStorage) snapshot() map[string][]byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.data)
}

type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

var storageID = component.MustNewIDWithName("file_storage", "wa")

// runWithStorage starts a connector (traces->metrics) on the storage, sends the batches, shuts down,
// and returns what it emitted and its telemetry.
func runWithStorage(t *testing.T, st *memStorage, sends ...[]spanSpec) ([]point, *componenttest.Telemetry) {
	t.Helper()
	return runConfigWithStorage(t, latencyConfig(), st, sends...)
}

func runConfigWithStorage(t *testing.T, cfg *Config, st *memStorage, sends ...[]spanSpec) ([]point, *componenttest.Telemetry) {
	t.Helper()
	return runStorageEach(t, cfg, st, nil, sends...)
}

// runStorageEach is runConfigWithStorage that calls before (when not nil) ahead of each batch.
func runStorageEach(t *testing.T, cfg *Config, st *memStorage, before func([]spanSpec), sends ...[]spanSpec) ([]point, *componenttest.Telemetry) {
	t.Helper()
	cfg.Storage = &storageID
	tel := componenttest.NewTelemetry()
	set := connectortest.NewNopSettings(Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.MetricsSink)
	c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, sink)
	must(t, err)
	must(t, c.Start(context.Background(), hostWith{storageID: st}))
	for _, s := range sends {
		if before != nil {
			before(s)
		}
		must(t, c.ConsumeTraces(context.Background(), traces(s...)))
	}
	must(t, c.Shutdown(context.Background()))
	return points(sink.AllMetrics()), tel
}

func TestCheckpointCarriesOpenWindowsAcrossRestart(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	ps, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}, {service: "a", name: "/x", end: 2, ms: 30}})
	if len(ps) != 0 {
		t.Fatalf("with storage, shutdown saves open windows instead of firing them: %+v", ps)
	}
	if counterValue(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "saved"}) == 0 {
		t.Fatal("no checkpoint saved")
	}
	ps, tel = runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 3, ms: 50}}, []spanSpec{{service: "a", name: "/x", end: 12, ms: 1}})
	wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 3) // 10, 30 before the restart, 50 after
	wantPoint(t, ps, "lat.max", attrsAX, 0, 10, 50)
	wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}, 1)
}

// A configuration with a where clause restores its own checkpoint: each start loads the config anew,
// so the clause is a new allocation every time, and the fingerprint must not depend on its address.
func TestCheckpointWithWhereClauseRestores(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	withWhere := func() *Config {
		cfg := latencyConfig()
		cfg.Aggregations[0].Where = &WhereConfig{SpanKind: []string{"server"}, Attributes: map[string]any{"tier": "web"}}
		return cfg
	}
	web := map[string]any{"tier": "web"}
	srv := ptrace.SpanKindServer
	_, _ = runConfigWithStorage(t, withWhere(), st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10, kind: srv, attrs: web}})
	ps, tel := runConfigWithStorage(t, withWhere(), st, []spanSpec{{service: "a", name: "/x", end: 2, ms: 30, kind: srv, attrs: web}},
		[]spanSpec{{service: "a", name: "/x", end: 12, ms: 1, kind: srv, attrs: web}})
	wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}, 1)
	wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 2) // one before the restart, one after
}

func TestCorruptOrUnreadableCheckpointStartsClean(t *testing.T) {
	for name, st := range map[string]*memStorage{
		"corrupt":    {data: map[string][]byte{checkpoint.Key: []byte("WACP\x01garbage")}},
		"truncated":  {data: map[string][]byte{checkpoint.Key: []byte("WA")}},
		"version":    {data: map[string][]byte{checkpoint.Key: []byte("WACP\x09")}},
		"unreadable": {data: map[string][]byte{}, failGet: errors.New("disk on fire")},
	} {
		t.Run(name, func(t *testing.T) {
			useFakeClock(t)
			ps, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
			wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1) // works from empty windows
			wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restore_failed"}, 1)
		})
	}
}

// A checkpoint of a format older than version 6 (no release has left one behind) is discarded like a
// damaged one, however sound its checksum: logged, counted, and the component starts with empty
// windows.
func TestOlderCheckpointFormatsAreDiscarded(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	_, _ = runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}})
	current := st.data[checkpoint.Key]
	for _, version := range []byte{1, 2, 3} {
		old := slices.Clone(current[:len(current)-4])
		old[len(checkpoint.Magic)] = version
		st.data[checkpoint.Key] = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, checkpoint.CRC32C))
		ps, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 2, ms: 30}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
		wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1) // the record before the restart is not restored
		wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restore_failed"}, 1)
		wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}, 0)
	}
}

// A checkpoint of format version 6 (the remembered identities in the value itself, as 128-bit hashes)
// is still read: its windows, streams and queue are restored, and its identities, which this version
// cannot match, are dropped.
func TestVersion6CheckpointIsRestoredWithoutItsIdentities(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	_, _ = runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10, id: 1}})
	v7 := st.data[checkpoint.Key]
	// The same checkpoint as version 6 wrote it: the identities' field holds them all (W, 64 groups,
	// the first with one identity of 16 bytes and its expiry), and no part beside it.
	oldIDs := binary.AppendVarint(nil, 0)
	oldIDs = binary.AppendUvarint(oldIDs, 64)
	oldIDs = binary.AppendUvarint(oldIDs, 1)
	oldIDs = append(oldIDs, make([]byte, 16)...)
	oldIDs = binary.AppendUvarint(oldIDs, 10)
	for range 63 {
		oldIDs = binary.AppendUvarint(oldIDs, 0)
	}
	b := v7[len(checkpoint.Magic)+1 : len(v7)-4]
	v6 := append([]byte(checkpoint.Magic), checkpoint.VersionV6)
	for field := range 5 { // the aggregations, the instance, the engine, the metric inputs, the identities
		n, w := binary.Uvarint(b)
		value := b[w : w+int(n)]
		b = b[w+int(n):]
		if field == 4 {
			value = oldIDs
		}
		v6 = append(binary.AppendUvarint(v6, uint64(len(value))), value...)
	}
	v6 = append(v6, b...) // the queued batches
	st.data = map[string][]byte{checkpoint.Key: binary.LittleEndian.AppendUint32(v6, crc32.Checksum(v6, checkpoint.CRC32C))}
	ps, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 2, ms: 30}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
	wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "restored"}, 1)
	wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 2) // the record before the restart, and the one after
	wantPoint(t, ps, "lat.max", attrsAX, 0, 10, 30)
}

// A checkpoint restores only into aggregations that keep the same state: another name or group_by
// or explicit buckets are refused; the exponential histogram's max_size, which only shapes the output,
// is not.
func TestCheckpointFromOtherAggregationsIsNotRestored(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*AggregationConfig)
		want   string
	}{
		{"name", func(a *AggregationConfig) { a.Name = "other" }, "restore_failed"},
		{"group_by", func(a *AggregationConfig) { a.GroupBy = keys("span.name") }, "restore_failed"},
		{"explicit_buckets", func(a *AggregationConfig) {
			a.Histogram = &HistogramConfig{Explicit: &ExplicitHistogramConfig{Buckets: []any{"10ms", "1s"}}}
		}, "restore_failed"},
		{"max_size", func(a *AggregationConfig) {
			a.Histogram = &HistogramConfig{Exponential: &ExponentialHistogramConfig{MaxSize: 20}}
		}, "restored"},
	} {
		t.Run(c.name, func(t *testing.T) {
			useFakeClock(t)
			st := &memStorage{data: map[string][]byte{}}
			runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}})
			// Same storage, another configuration.
			cfg := latencyConfig()
			c.change(&cfg.Aggregations[0])
			must(t, cfg.Validate())
			_, tel := runConfigWithStorage(t, cfg, st)
			wantCounter(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": c.want}, 1)
		})
	}
}

func TestSaveFailureIsCountedAndMissingExtensionFailsStart(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}, failSet: errors.New("read-only")}
	_, tel := runWithStorage(t, st, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}})
	// One instance, so one save, at its Shutdown.
	if got := counterValue(t, tel, "otelcol_window_aggregator_checkpoints", map[string]string{"reason": "save_failed"}); got != 1 {
		t.Fatalf("failed saves counted %d, want 1", got)
	}
	cfg := latencyConfig()
	cfg.Storage = &storageID
	c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), connectortest.NewNopSettings(Type), cfg, consumertest.NewNop())
	must(t, err)
	defer func() { _ = c.Shutdown(context.Background()) }()
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err == nil {
		t.Fatal("started without its storage extension")
	}
}

// Results that could not be delivered before a clean shutdown are checkpointed and delivered after
// the restart; restoring them neither hangs Start nor loses them.
func TestUndeliveredResultsSurviveRestartWithStorage(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	cfg := latencyConfig()
	cfg.Storage = &storageID
	run := func(next *flakyMetrics, sends ...[]spanSpec) {
		t.Helper()
		set := connectortest.NewNopSettings(Type)
		c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, next)
		must(t, err)
		started := make(chan error, 1)
		go func() { started <- c.Start(context.Background(), hostWith{storageID: st}) }()
		select {
		case err := <-started:
			must(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Start hung restoring the checkpoint")
		}
		for _, sp := range sends {
			must(t, c.ConsumeTraces(context.Background(), traces(sp...)))
		}
		must(t, c.Shutdown(context.Background()))
	}
	down := &flakyMetrics{err: errors.New("backend down")}
	run(down, []spanSpec{{service: "a", name: "/x", end: 1, ms: 10}}, []spanSpec{{service: "a", name: "/x", end: 11, ms: 1}})
	up := &flakyMetrics{}
	run(up) // the queued [0,10) goes out on the first flush after the restart, here at shutdown
	wantPoint(t, points(up.sink.AllMetrics()), "lat.count", attrsAX, 0, 10, 1)
}

// A batch queued for a metrics output that has shut down, while another output of the same component
// still runs, stays queued when there is storage: the other output's flushes retry the queue and keep
// it (send's stopped-sink branch), the last shutdown checkpoints it, and the next start delivers it.
func TestQueuedResultsOfAStoppedOutputOutliveTheOtherOutputsFlushes(t *testing.T) {
	useFakeClock(t)
	ctx := testContext(t)
	st := &memStorage{data: map[string][]byte{}}
	cfg := latencyConfig()
	cfg.Aggregations = append(cfg.Aggregations, AggregationConfig{
		Name: "logn", Signal: "logs", GroupBy: keys("service.name"), Outputs: []string{"count"},
	})
	cfg.Storage = &storageID
	f := NewConnectorFactory()
	set := connectortest.NewNopSettings(Type)
	tracesOut := &flakyMetrics{err: errors.New("backend down")}
	logsOut := &flakyMetrics{}
	tc, err := f.CreateTracesToMetrics(ctx, set, cfg, tracesOut)
	must(t, err)
	lc, err := f.CreateLogsToMetrics(ctx, set, cfg, logsOut)
	must(t, err)
	must(t, tc.Start(ctx, hostWith{storageID: st}))
	must(t, lc.Start(ctx, hostWith{storageID: st}))
	must(t, tc.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10})))
	must(t, tc.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "/x", end: 11, ms: 1}))) // [0,10) fires, is refused, queued
	must(t, tc.Shutdown(ctx))                                                                  // its last attempt fails too
	tracesOut.setErr(nil)                                                                      // up again, but its instance has shut down: nothing may be sent to it
	must(t, lc.ConsumeLogs(ctx, logs(logSpec{service: "a", ts: 12})))
	must(t, lc.ConsumeLogs(ctx, logs(logSpec{service: "a", ts: 25}))) // [10,20) fires: a flush that retries the queue
	settleAll(t)
	if got := find(points(logsOut.sink.AllMetrics()), "logn.count", "service.name=a(Str)"); len(got) == 0 {
		t.Fatal("the logs output got no window before its shutdown: no flush ran while the traces output was stopped")
	}
	must(t, lc.Shutdown(ctx)) // the last instance: checkpoints the queue
	if n := len(tracesOut.sink.AllMetrics()); n != 0 {
		t.Fatalf("%d batches were sent to a metrics output after its instance had shut down", n)
	}

	ps, _ := runConfigWithStorage(t, cfg, st) // a restart: the traces output is up
	wantPoint(t, ps, "lat.count", attrsAX, 0, 10, 1)
	if n := len(find(ps, "lat.count", attrsAX)); n != 1 {
		t.Fatalf("lat.count for a,/x: %d windows after the restart, want only the one starting at 0", n)
	}
}
