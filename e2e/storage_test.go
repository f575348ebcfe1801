package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

func storageConfig(recv int, out, dir, checkpoint string) string {
	return storageConfigWith(recv, out, dir, `
    window: {size: 10s}
`+windowByWindow+`
    checkpoint: {interval: `+checkpoint+`}
    aggregations:
      - {name: lat, signal: spans, outputs: [count, sum, max]}`)
}

// storageConfigWith is a config with window_aggregator as a connector of the given settings (YAML
// indented under it), its state in file_storage in dir, between an OTLP receiver on recv and the
// test's server at out.
func storageConfigWith(recv int, out, dir, settings string) string {
	return fileStorageExtension(dir) + otlpReceiver(recv) + fmt.Sprintf(`
connectors:
  window_aggregator:
    storage: file_storage/wa%s
exporters:%s
service:
  extensions: [file_storage/wa]
  telemetry: {metrics: {level: none}}
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [otlp_grpc]}
`, settings, otlpExporter("otlp_grpc", out))
}

// storageRun is a test server, a storage directory and a receiver port that the distribution is
// started on, again and again, with a storage config.
type storageRun struct {
	t    *testing.T
	out  *otlpServer
	dir  string
	recv int
}

func (r *storageRun) start(checkpoint string) (*collector, *client) {
	return runCollector(r.t, r.recv, storageConfig(r.recv, r.out.addr, r.dir, checkpoint))
}

// sendAll exports each of reqs over c's traces client, in order.
func sendAll(t *testing.T, c *client, reqs ...ptraceotlp.ExportRequest) {
	t.Helper()
	for _, req := range reqs {
		if _, err := c.traces.Export(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStateSurvivesRestartThroughFileStorage(t *testing.T) {
	skipShort(t)
	base, at := pastBase()
	first := []ptraceotlp.ExportRequest{spans(span{"a", "/x", at(1), 10}), spans(span{"a", "/x", at(2), 20})}
	rest := []ptraceotlp.ExportRequest{spans(span{"a", "/x", at(3), 30}), spans(span{"a", "/x", at(12), 1})}

	// Uninterrupted run.
	whole := &storageRun{t: t, out: startServer(t), dir: t.TempDir(), recv: freePort(t)}
	col, c := whole.start("1h")
	sendAll(t, c, append(first, rest...)...)
	wantPoints(t, whole.out, base, "lat.count", "", 0, 3)
	col.stop(t)

	// Half a window, SIGTERM, restart, the rest.
	split := &storageRun{t: t, out: startServer(t), dir: t.TempDir(), recv: freePort(t)}
	col, c = split.start("1h")
	sendAll(t, c, first...)
	col.stop(t)
	if n := len(split.out.points(base)); n != 0 {
		t.Fatalf("with storage, shutdown must save open windows, not fire them: %d points", n)
	}
	col, c = split.start("1h")
	sendAll(t, c, rest...)
	wantPoints(t, split.out, base, "lat.count", "", 0, 3)
	col.stop(t)
	for _, m := range []string{"lat.count", "lat.sum", "lat.max"} {
		w, s := pointsOf(whole.out, base, m), pointsOf(split.out, base, m)
		if fmt.Sprint(w) != fmt.Sprint(s) {
			t.Fatalf("%s: interrupted run %v, uninterrupted %v", m, s, w)
		}
	}
	// [10,20) stays open, saved at shutdown: only [0,10) fired, with 10+20+30.
	if got := pointsOf(split.out, base, "lat.sum"); len(got) != 1 || got[0] != 60 {
		t.Fatalf("lat.sum %v, want [60]", got)
	}
}

// After kill -9, what was checkpointed survives; at most one checkpoint interval is lost.
func TestKillNineLosesAtMostOneCheckpointInterval(t *testing.T) {
	skipShort(t)
	base, at := pastBase()
	r := &storageRun{t: t, out: startServer(t), dir: t.TempDir(), recv: freePort(t)}
	col, c := r.start("200ms")
	sendAll(t, c, spans(span{"a", "/x", at(1), 10}))
	// Wait for a checkpoint written after the send: the storage file changes.
	sent := time.Now()
	eventually(t, "a checkpoint after the first span", func() bool { return modifiedAfter(r.dir, sent.Add(300*time.Millisecond)) })
	sendAll(t, c, spans(span{"a", "/x", at(2), 20}))
	if err := col.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-col.done
	col, c = r.start("200ms")
	sendAll(t, c, spans(span{"a", "/x", at(12), 1}))
	var got []float64
	eventually(t, "window [0,10) after the restart", func() bool {
		got = nil
		for _, p := range r.out.points(base) {
			if p.metric == "lat.count" && p.start == 0 {
				got = append(got, p.value)
			}
		}
		return len(got) == 1
	})
	if got[0] != 1 && got[0] != 2 {
		t.Fatalf("count %v: the span checkpointed before kill -9 (and perhaps the one after) should be there", got[0])
	}
	col.stop(t)
}

func pointsOf(s *otlpServer, base int64, metric string) []float64 {
	var out []float64
	for _, p := range s.points(base) {
		if p.metric == metric {
			out = append(out, p.value)
		}
	}
	return out
}

// modifiedAfter reports whether a file under dir changed after t.
func modifiedAfter(dir string, t time.Time) bool {
	found := false
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && info.ModTime().After(t) {
			found = true
		}
		return nil
	})
	return found
}

// A damaged file_storage file (garbage, a truncated one) does not stop the collector: it logs the
// storage it cannot open, runs without durable state and aggregates.
func TestDamagedStorageFileDoesNotStopTheCollector(t *testing.T) {
	skipShort(t)
	for _, damage := range []struct {
		name string
		do   func(path string) error
	}{
		{"garbage", func(path string) error {
			return os.WriteFile(path, bytes.Repeat([]byte("not a bolt database "), 400), 0o600)
		}},
		{"truncated", func(path string) error { return os.Truncate(path, 4096) }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			base, at := pastBase()
			r := &storageRun{t: t, out: startServer(t), dir: t.TempDir(), recv: freePort(t)}
			col, c := r.start("1h")
			sendAll(t, c, spans(span{"a", "/x", at(1), 10}))
			col.stop(t) // the storage file now holds a checkpoint
			files, err := os.ReadDir(r.dir)
			if err != nil || len(files) == 0 {
				t.Fatalf("no storage file in %s: %v", r.dir, err)
			}
			for _, f := range files {
				if err := damage.do(filepath.Join(r.dir, f.Name())); err != nil {
					t.Fatal(err)
				}
			}
			col, c = r.start("1h")
			sendAll(t, c, spans(span{"a", "/x", at(2), 20}), spans(span{"a", "/x", at(12), 1}))
			wantPoints(t, r.out, base, "lat.count", "", 0, 1) // the span after the restart; the saved one is lost
			col.stop(t)
			if out := col.output.String(); !strings.Contains(out, "Cannot open the storage for window state checkpoints") {
				t.Fatalf("the collector did not log the storage it cannot open:\n%s", out)
			}
		})
	}
}

// Five kill -9 at random moments under live traffic, with storage and checkpoint.interval 2s: no
// point is ever delivered twice with different values, no cumulative count goes back, and what is
// lost stays within what was sent in the seconds before each kill.
func TestKillNineUnderLoadNeverChangesADeliveredValue(t *testing.T) {
	skipShort(t)
	out, dir, recv := startServer(t), t.TempDir(), freePort(t)
	config := storageConfigWith(recv, out.addr, dir, `
    window: {size: 1s}
    watermark: {max_out_of_orderness: 200ms, idle_timeout: 1s}
    allowed_lateness: 2s
    checkpoint: {interval: 2s}
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name], outputs: [count]}`)
	col, c := runCollector(t, recv, config)
	var mu sync.Mutex
	cur := c
	var sentAt []time.Time // of every span the collector took
	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now()
			mu.Lock()
			client := cur
			mu.Unlock()
			if _, err := client.traces.Export(context.Background(), spans(span{fmt.Sprint("s", i%3), "/x", now.UnixNano(), 1})); err == nil {
				mu.Lock()
				sentAt = append(sentAt, now)
				mu.Unlock()
			}
		}
	}()
	rng := rand.New(rand.NewPCG(5, 6))
	var kills []time.Time
	for range 5 {
		time.Sleep(time.Duration(500+rng.IntN(2000)) * time.Millisecond) // a random moment of live traffic
		if err := col.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-col.done
		kills = append(kills, time.Now())
		col, c = runCollector(t, recv, config)
		mu.Lock()
		cur = c
		mu.Unlock()
	}
	time.Sleep(time.Second)
	close(stop)
	<-sent
	// The idle rule closes the last windows: wait until each series has a point at the end of the
	// window of the last span sent.
	mu.Lock()
	lastEnd := sentAt[len(sentAt)-1].Unix() + 1 // whole seconds: 1 s windows
	mu.Unlock()
	eventually(t, "a point of every series at the last window's end", func() bool {
		latest := map[string]int64{}
		for _, p := range out.points(0) {
			if p.metric == "lat.count" {
				latest[p.attrs] = max(latest[p.attrs], p.end)
			}
		}
		for _, end := range latest {
			if end < lastEnd {
				return false
			}
		}
		return len(latest) == 3
	})
	col.stop(t)

	// Every point, by series and window end: one value, and per series no total going back.
	byKey := map[string]float64{}
	type pt struct {
		end int64
		v   float64
	}
	bySeries := map[string][]pt{}
	for _, p := range out.points(0) {
		if p.metric != "lat.count" {
			continue
		}
		key := fmt.Sprintf("%s@%d", p.attrs, p.end)
		if v, ok := byKey[key]; ok && v != p.value {
			t.Fatalf("%s delivered as %v and as %v", key, v, p.value)
		}
		byKey[key] = p.value
		bySeries[p.attrs] = append(bySeries[p.attrs], pt{p.end, p.value})
	}
	var total float64
	for series, ps := range bySeries {
		sort.Slice(ps, func(i, j int) bool { return ps[i].end < ps[j].end })
		for i := 1; i < len(ps); i++ {
			if ps[i].v < ps[i-1].v {
				t.Fatalf("%s: total %v at %d after %v at %d: a cumulative count went back", series, ps[i].v, ps[i].end, ps[i-1].v, ps[i-1].end)
			}
		}
		total += ps[len(ps)-1].v
	}
	// Lost: at most what was sent in the 3 s before each kill (a checkpoint interval and a window).
	mu.Lock()
	defer mu.Unlock()
	var bound int
	for _, at := range sentAt {
		for _, k := range kills {
			if at.After(k.Add(-3*time.Second)) && !at.After(k) {
				bound++
				break
			}
		}
	}
	if lost := len(sentAt) - int(total); lost < 0 || lost > bound {
		t.Fatalf("%d spans sent, %v counted: %d lost, bound %d", len(sentAt), total, lost, bound)
	}
	t.Logf("%d spans sent, %v counted over 5 kill -9 (loss bound %d)", len(sentAt), total, bound)
}
