package stream

import (
	"testing"
	"time"
)

// The sources an operator reads, worked out by hand. max_sources 3, max_out_of_orderness 2 s,
// source_idle_timeout 30 s. At 1000 s: a at 1000, b at 990, c at 995, then d and e (past the
// limit) at 950 and 980, which share one source at 980. At 1020 s only a is heard from again (1020);
// b, c and the shared one were last heard at 1000 and are silent from 1030. At 1025 s:
// shared 978 (holds W back: the least), b 988, c 993, a 1018. At 1031 s a alone is active.
func TestSourcesAsAnOperatorReadsThem(t *testing.T) {
	cfg := perSource(3, 30*time.Second)
	cfg.MaxOutOfOrderness = 2 * time.Second
	h := newHarness(t, cfg)
	h.sbatch(srec{"a", 0, "k", 1000, 1}, srec{"b", 0, "k", 990, 1}, srec{"c", 0, "k", 995, 1},
		srec{"d", 0, "k", 950, 1}, srec{"e", 0, "k", 980, 1})
	h.at(1020)
	h.sbatch(srec{"a", 0, "k", 1020, 1})
	h.at(1025)
	type want struct {
		key     string
		shared  bool
		w       float64
		idle    bool
		holding bool
	}
	check := func(limit, wantTotal int, wants ...want) {
		t.Helper()
		got, total, _ := h.e.Sources(limit, 0)
		if total != wantTotal || len(got) != len(wants) {
			t.Fatalf("Sources(%d): %d of %d, want %d of %d: %+v", limit, len(got), total, len(wants), wantTotal, got)
		}
		for i, w := range wants {
			g := got[i]
			if string(g.Key) != w.key || g.Shared != w.shared || !g.HasWatermark || g.Watermark != int64(w.w*float64(sec)) ||
				g.Idle != w.idle || g.HoldsBack != w.holding {
				t.Errorf("source %d: %+v, want %+v", i, g, w)
			}
		}
	}
	check(10, 4, want{"", true, 978, false, true}, want{"b", false, 988, false, false},
		want{"c", false, 993, false, false}, want{"a", false, 1018, false, false})
	check(2, 4, want{"", true, 978, false, true}, want{"b", false, 988, false, false})
	h.wantW(978, "the shared source holds it")
	// At 1031 s b, c and the shared source are idle (their slots not yet freed: nothing has read W).
	h.at(1031)
	check(10, 4, want{"a", false, 1018, false, true}, want{"", true, 978, true, false},
		want{"b", false, 988, true, false}, want{"c", false, 993, true, false})
	if got, total, _ := newHarness(t, tumbling10s()).e.Sources(10, 0); got != nil || total != 0 {
		t.Fatalf("without per-source tracking: %v, %d; want none", got, total)
	}
}

// Sources sending together are tied: none is marked as holding W back. At 1000 s a, b and c send
// 1000, 999.6 and 999.9 (W 997.6, max_out_of_orderness 2 s), d 990. Within a tie of 0.5 s of the
// least (d) d alone holds W back; once d has caught up (1000.1 at 1001 s), a, b, c and d are within
// 0.5 s of b: none holds it back, all four are at W, b's first (the least). Within 0.2 s, b alone.
func TestTiedSourcesHoldWTogether(t *testing.T) {
	cfg := perSource(10, 30*time.Second)
	cfg.MaxOutOfOrderness = 2 * time.Second
	h := newHarness(t, cfg)
	h.sbatch(srec{"a", 0, "k", 1000, 1}, srec{"b", 0, "k", 999.6, 1}, srec{"c", 0, "k", 999.9, 1}, srec{"d", 0, "k", 990, 1})
	marks := func(tie float64) (holds, atW string) {
		got, _, n := h.e.Sources(2, int64(tie*float64(sec)))
		if n != 0 && n != 4 {
			t.Errorf("tie %v s: %d sources at W, want 4 (counted past the 2 listed) or none", tie, n)
		}
		for _, g := range got {
			if g.HoldsBack {
				holds += string(g.Key)
			}
			if g.AtW {
				atW += string(g.Key)
			}
		}
		return holds, atW
	}
	if holds, atW := marks(0.5); holds != "d" || atW != "" {
		t.Errorf("d 9.6 s behind, tie 0.5 s: holding %q, at W %q; want d alone holding", holds, atW)
	}
	h.at(1001)
	h.sbatch(srec{"d", 0, "k", 1000.1, 1})
	if holds, atW := marks(0.5); holds != "" || atW != "bc" {
		t.Errorf("four within 0.4 s, tie 0.5 s: holding %q, at W %q listed; want none holding, the first two of four at W listed, least first", holds, atW)
	}
	if holds, atW := marks(0.2); holds != "b" || atW != "" {
		t.Errorf("b 0.3 s behind the next, tie 0.2 s: holding %q, at W %q; want b alone", holds, atW)
	}
}
