package gen

import (
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// checkBatch checks every record of a batch built at now against its kind's promised event time,
// and that the kinds match the returned counts. It returns the counts by attribute.
func checkBatch(cfg Config, now time.Time, td ptrace.Traces, ld plog.Logs, counts Counts) (Counts, error) {
	var seen Counts
	check := func(k Kind, ts time.Time, hasTime bool) error {
		seen[k]++
		if k == Invalid {
			if hasTime {
				return fmt.Errorf("invalid record with a timestamp %v", ts)
			}
			return nil
		}
		return checkEventTimeAt(cfg, now, k, ts)
	}
	for _, r := range allSpans(td) {
		k, err := kindOf(r.span.Attributes())
		if err != nil {
			return seen, err
		}
		if err := check(k, r.span.EndTimestamp().AsTime(), r.span.EndTimestamp() != 0); err != nil {
			return seen, err
		}
	}
	for _, r := range allLogs(ld) {
		k, err := kindOf(r.rec.Attributes())
		if err != nil {
			return seen, err
		}
		if k != Invalid && !r.rec.ObservedTimestamp().AsTime().Equal(now) {
			return seen, fmt.Errorf("observed timestamp %v, want the batch's now %v", r.rec.ObservedTimestamp().AsTime(), now)
		}
		if err := check(k, r.rec.Timestamp().AsTime(), r.rec.Timestamp() != 0); err != nil {
			return seen, err
		}
	}
	if seen != counts {
		return seen, fmt.Errorf("kinds by attribute %v, returned counts %v", seen, counts)
	}
	return seen, nil
}

// TestWarmUp drives the generator with an injected clock, a batch every 250 ms alternating spans
// and logs, from a first batch well after testNow: during the warm-up, counted from that first
// batch, every record is on time and within the jitter of its batch's now; from its end on, every
// kind shows up in its configured share.
func TestWarmUp(t *testing.T) {
	cfg := testConfig()
	cfg.Late, cfg.TooLate, cfg.Future, cfg.Invalid = 0.2, 0.1, 0.05, 0.05
	cfg.WarmUp = 5 * time.Second
	g := newGen(t, cfg, 11)
	first := testNow.Add(time.Hour) // the warm-up starts with the first batch, whatever its time
	end := first.Add(cfg.WarmUp)
	if !g.WarmingUp(testNow) {
		t.Fatal("WarmingUp false before the first batch")
	}

	const n, step = 500, 250 * time.Millisecond
	var during, after Counts
	var warmBatches int
	for i := 0; i < 80; i++ { // 20 s of batches: 5 s of warm-up, then 15 s of mixed records
		now := first.Add(time.Duration(i) * step)
		var td ptrace.Traces
		var ld plog.Logs
		var counts Counts
		if i%2 == 0 {
			td, counts = g.Spans(now, n)
			ld = plog.NewLogs()
		} else {
			ld, counts = g.Logs(now, n)
			td = ptrace.NewTraces()
		}
		seen, err := checkBatch(cfg, now, td, ld, counts)
		if err != nil {
			t.Fatalf("batch %d at first+%v: %v", i, now.Sub(first), err)
		}
		warm := now.Before(end)
		if g.WarmingUp(now) != warm {
			t.Fatalf("WarmingUp(first+%v) = %v, want %v", now.Sub(first), !warm, warm)
		}
		if warm {
			warmBatches++
			if seen[OnTime] != n {
				t.Fatalf("batch %d at first+%v, within the warm-up: kinds %v, want all on time", i, now.Sub(first), seen)
			}
			during.Add(seen)
		} else {
			after.Add(seen)
		}
	}
	if warmBatches != 20 {
		t.Fatalf("%d batches in the warm-up, want 20 (5 s at one every 250 ms)", warmBatches)
	}
	if during[OnTime] != during.Total() {
		t.Fatalf("records during the warm-up: %v", during)
	}
	checkShares(t, cfg, after, int(after.Total())) // 60 batches of 500: 30 000 records
}

// TestWarmUpBoundary checks the warm-up's edges: it ends exactly WarmUp after the first batch's now
// and for good, and no warm-up at all means the first batch is already mixed.
func TestWarmUpBoundary(t *testing.T) {
	cfg := testConfig()
	cfg.Late, cfg.TooLate, cfg.Future, cfg.Invalid = 1, 0, 0, 0 // every record late, but for the warm-up
	cfg.WarmUp = 5 * time.Second
	g := newGen(t, cfg, 13)
	if _, c := g.Spans(testNow, 100); c[OnTime] != 100 {
		t.Fatalf("first batch: %v, want all on time", c)
	}
	if _, c := g.Logs(testNow.Add(cfg.WarmUp-time.Nanosecond), 100); c[OnTime] != 100 {
		t.Fatalf("last instant of the warm-up: %v, want all on time", c)
	}
	if g.WarmingUp(testNow.Add(cfg.WarmUp)) {
		t.Fatal("still warming up WarmUp after the first batch")
	}
	if _, c := g.Spans(testNow.Add(cfg.WarmUp), 100); c[Late] != 100 {
		t.Fatalf("first batch after the warm-up: %v, want all late", c)
	}
	// A clock that steps back into the warm-up's span afterwards does not start it again.
	if g.WarmingUp(testNow.Add(time.Second)) {
		t.Fatal("warming up again after the clock stepped back")
	}
	if _, c := g.Spans(testNow.Add(time.Second), 100); c[Late] != 100 {
		t.Fatalf("clock stepped back after the warm-up: %v, want all late", c)
	}

	cfg.WarmUp = 0
	g = newGen(t, cfg, 13)
	if g.WarmingUp(testNow) {
		t.Fatal("WarmingUp true without a warm-up")
	}
	if _, c := g.Logs(testNow, 100); c[Late] != 100 {
		t.Fatalf("first batch without a warm-up: %v, want all late", c)
	}
}
