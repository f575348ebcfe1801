package e2e

// A restart with file_storage while an agent keeps sending: what the agent queued while the collector was
// down is aggregated once the collector is back, and the windows hold what was sent.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// agent generates live spans on a ticker and sends them while the collector is up; while it is down
// it queues them, and it sends the queue, oldest first, as soon as the collector is back.
type agent struct {
	sent *ledger

	mu     sync.Mutex // held while sending: pause waits for the send in flight
	c      *client    // nil while the collector is down
	queue  []ptraceotlp.ExportRequest
	queued int // spans generated while down
	errs   []error
}

func (a *agent) generate(services []string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, svc := range services {
		name := "live"
		if a.c == nil {
			name = "queued"
		}
		ends := jittered(now, 3, 200*time.Millisecond)
		a.queue = append(a.queue, svcSpans(svc, name, ends...))
		a.sent.add("lat.count", "service.name="+svc, ends...)
		if a.c == nil {
			a.queued += len(ends)
		}
	}
	a.flushLocked()
}

// flushLocked sends the queue, oldest first, stopping at the first error (under mu).
func (a *agent) flushLocked() {
	for a.c != nil && len(a.queue) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := a.c.traces.Export(ctx, a.queue[0])
		cancel()
		if err != nil {
			a.errs = append(a.errs, err)
			return
		}
		a.queue = a.queue[1:]
	}
}

func (a *agent) pause() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c = nil
}

// resume sends the queue right away and reports how many requests it held, and how many spans were
// made while the collector was down.
func (a *agent) resume(c *client) (requests, queued int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	requests, queued = len(a.queue), a.queued
	a.c = c
	a.flushLocked()
	return requests, queued
}

// The collector restarts (with file_storage) while live traffic goes on: an agent queues what is made
// while the collector is down, for longer than idle_timeout, and sends it once the collector is back
// (1.5 s after it is up, within idle_timeout of the start). The downtime is not silence: nothing
// queued is late, and the totals over both runs are what was sent.
func TestRestartWithStorageDuringLiveTraffic(t *testing.T) {
	skipShort(t)
	const size, ooo, idle = 2 * time.Second, time.Second, 3 * time.Second
	out := startServer(t)
	dir := t.TempDir()
	recv, tel := freePort(t), freePort(t)
	addr := loopback(recv)
	config := connectorWatermarkConfig(recv, tel, out.addr, "{max_out_of_orderness: 1s, idle_timeout: 3s}", "2s", dir)

	services := []string{"a", "b"}
	a := &agent{sent: newLedger(size)}
	col := startCollector(t, config, addr)
	a.resume(dial(t, addr))

	var stopGen atomic.Bool
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		tick := time.NewTicker(150 * time.Millisecond)
		defer tick.Stop()
		for n := 0; n < 300 && !stopGen.Load(); n++ {
			now := <-tick.C
			a.generate(services, now)
		}
	}()
	defer func() { stopGen.Store(true); <-genDone }()

	time.Sleep(3 * time.Second) // live traffic, first run
	a.pause()
	col.stop(t)
	downFrom := time.Now()
	time.Sleep(idle + 5*time.Second) // the agent queues meanwhile
	col = startCollector(t, config, addr)
	up := time.Now()
	// The agent's next retry finds the collector back a moment after it is up: later than the
	// component's ticker first runs, sooner than idle_timeout after the start.
	time.Sleep(1500 * time.Millisecond)
	c := dial(t, addr)
	requests, queued := a.resume(c)
	t.Logf("down %s; %d queued requests (%d spans) sent %s after the restart", up.Sub(downFrom).Round(time.Millisecond),
		requests, queued, time.Since(up).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // live traffic, second run
	stopGen.Store(true)
	<-genDone
	a.mu.Lock()
	errs, left := a.errs, len(a.queue)
	a.mu.Unlock()
	if len(errs) > 0 || left > 0 {
		t.Fatalf("sending: %v; %d requests left in the queue", errs, left)
	}

	// Once the traffic stops, the idle rule closes the last windows: every window's total is what was
	// sent, over both runs.
	want := a.sent.get("lat.count")
	var diff string
	if !within(15*time.Second, func() bool {
		diff = diffTotals(windowTotals(t, out, "lat.count", size), want)
		return diff == ""
	}) {
		t.Errorf("once the traffic stopped and idle_timeout passed, counts per window differ from what was sent:\n%s", diff)
	}
	samples := scrape(t, tel)
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("second run: late_records = %v, want 0", n)
	}
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_records", map[string]string{"outcome": "late"}); n != 0 {
		t.Errorf("second run: records{outcome=late} = %v, want 0", n)
	}
	col.stop(t)
	if late := out.lateRecords(); len(late) > 0 {
		n := map[string]int{}
		for _, r := range late {
			n[r.name+"/"+r.reason]++
		}
		t.Errorf("%d spans routed late (by span name and reason: %v)", len(late), n)
	}
	if d := diffTotals(windowTotals(t, out, "lat.count", size), want); d != "" {
		t.Errorf("after the final stop, counts per window differ from what was sent:\n%s", d)
	}
}

// holdConfig: spans and logs each pass a batch processor that holds them until its own Shutdown
// (send_batch_size far above what is sent, timeout 1m), into window_aggregator as a connector (proc
// false) or as a processor with file_storage in dir (proc true; without the batch processors when hold
// is false, with the same window_aggregator settings, so that the state restores).
