package e2e

// Live-traffic tests of the watermark on the built distribution: wall-clock timestamps, short windows,
// and the expectations worked out from the contract (W <= now - max_out_of_orderness; a record stamped
// ahead of the clock is aggregated but cannot push W past it).

import (
	"testing"
	"time"
)

func TestSkewedHostDoesNotMakeOthersLate(t *testing.T) {
	skipShort(t)
	const size, ooo = 2 * time.Second, time.Second
	r := startLiveRun(t, size, "{max_out_of_orderness: 1s}", "3s", "a", "b", "c")
	skewed := 0
	start, end := r.traffic(7*time.Second, 60, func(_ int, now time.Time) {
		ahead := jittered(now.Add(2*time.Minute), 2, 200*time.Millisecond)
		r.send("skewed", ahead...)
		skewed += len(ahead)
	})
	r.fired.poll()
	r.checkPrompt(ooo, start, end, 2)

	// The collector's own view: the skewed spans are counted as ahead of the clock, and W lags the
	// clock by max_out_of_orderness, held there by the clock.
	samples := scrape(t, r.tel)
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_clock_skew_records", map[string]string{"reason": "ahead_of_clock"}); n != float64(skewed) {
		t.Errorf("clock_skew_records{reason=ahead_of_clock} = %v, want the %d skewed spans", n, skewed)
	}
	if lag, ok := telemetrySum(samples, "otelcol_window_aggregator_watermark_lag", map[string]string{"held_by": "clock"}); !ok || lag < ooo.Seconds() || lag > ooo.Seconds()+1 {
		t.Errorf("watermark_lag{held_by=clock} = %v (present: %v), want max_out_of_orderness (%v s): W <= now - max_out_of_orderness", lag, ok, ooo.Seconds())
	}
	if n, _ := telemetrySum(samples, "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("late_records = %v before the probe, want 0", n)
	}
	// The final SIGTERM fires the skewed host's future windows too.
	r.finish(ooo)
	t.Logf("sent %d on-time spans and %d skewed ones in %s", r.sent.total("lat.count")-skewed, skewed, end.Sub(start).Round(time.Millisecond))
}

// One stray span stamped 60 s ahead, amid live on-time traffic, with the idle rule on and a silence
// longer than idle_timeout: nothing after it is late, and every window counts what was sent.
func TestStraySpanAheadOfClock(t *testing.T) {
	skipShort(t)
	const size, ooo, idle = 2 * time.Second, time.Second, 3 * time.Second
	r := startLiveRun(t, size, "{max_out_of_orderness: 1s, idle_timeout: 3s}", "2s", "a", "b")
	r.traffic(2*time.Second, 50, func(n int, now time.Time) {
		if n == 6 {
			r.send("stray", now.Add(time.Minute).UnixNano())
		}
	})
	// Silence: longer than idle_timeout, no record at all.
	silence := time.Now()
	time.Sleep(idle + 1500*time.Millisecond)
	r.fired.poll()
	from, until := r.traffic(5*time.Second, 50, nil)
	r.fired.poll()
	// The windows that close after the silence, while traffic runs again.
	r.checkPrompt(ooo, from, until, 1)
	if n, _ := telemetrySum(scrape(t, r.tel), "otelcol_window_aggregator_late_records", nil); n != 0 {
		t.Errorf("late_records = %v, want 0", n)
	}
	r.finish(ooo)
	t.Logf("silence of %s; %d spans sent", from.Sub(silence).Round(time.Millisecond), r.sent.total("lat.count"))
}
