package stream

import (
	"testing"
	"time"
)

// The model's own check.

// TestReferenceModelSelfCheck pins the model to a few hand-computed cases, so that a wrong model cannot
// pass silently against a wrong engine.
func TestReferenceModelSelfCheck(t *testing.T) {
	s := int64(time.Second)
	c := &modelConfig{size: 30 * time.Second, slide: 10 * time.Second, lateness: 10 * time.Second,
		skew: time.Minute, aggs: []Aggregation{{Quantiles: []float64{0.5}}}}
	m := newRefModel(c)
	now := int64(1000 * s)
	b := m.begin(now)
	if v := b.add(0, "a", 25*s, 1); v != OnTime {
		t.Fatalf("first record: %v", v)
	}
	b.end()
	if m.watermark() != 25*s {
		t.Fatalf("W = %d", m.watermark())
	}
	if got := m.collect(now); len(got) != 0 {
		t.Fatalf("fired at W=25s: %+v", got)
	}
	b = m.begin(now)
	b.add(0, "a", 45*s, 3) // W = 45: windows ending 30 and 40 fire; end 30 expires (30+10 <= 45)
	b.end()
	got := m.collect(now)
	if len(got) != 2 || got[0].End != 30*s || got[1].End != 40*s || got[0].Count != 1 || got[1].Count != 1 || got[1].Late {
		t.Fatalf("firings at W=45: %+v", got)
	}
	b = m.begin(now)
	// t=25 is in windows ending 30 (expired), 40 (fired, live until 50) and 50 (not fired): late.
	if v := b.add(0, "a", 25*s, 5); v != LateUpdate {
		t.Fatalf("late record: %v", v)
	}
	if v := b.add(0, "a", 5*s, 5); v != Expired { // windows ending 10, 20, 30: all expired
		t.Fatalf("expired record: %v", v)
	}
	if v := b.add(0, "a", 0, 5); v != Invalid {
		t.Fatalf("t=0: %v", v)
	}
	if v := b.add(0, "a", now+time.Minute.Nanoseconds()+1, 5); v != Future {
		t.Fatalf("future: %v", v)
	}
	b.end()
	got = m.collect(now)
	// window [10,40): late firing, delta count 1 sum 5, whole {1,5}: avg 3, p50 rank floor(0.5) = 0 -> 1.
	if len(got) != 1 || !got[0].Late || got[0].Start != 10*s || got[0].Count != 1 || got[0].Sum != 5 ||
		got[0].WindowValueCount != 2 || got[0].Avg != 3 || got[0].Min != 1 || got[0].Max != 5 || got[0].Quantiles[0] != 1 {
		t.Fatalf("late firing: %+v", got)
	}
	all := m.fireAll()
	// left: [20,50) {25, 45, 25}, [30,60) {45}, [40,70) {45}; never fired.
	if len(all) != 3 || all[0].Count != 3 || all[0].Late || all[1].Count != 1 || all[2].Count != 1 {
		t.Fatalf("FireAll: %+v", all)
	}
	// weights: a record of weight 3 stands for three of its value. The windows [80, 110), [90, 120)
	// and [100, 130) each hold 10×3 and 1: count 4, sum 31, avg 7.75; the values repeated, 1 10 10 10:
	// p50 is rank ceil(0.5×4)−1 = 1, 10.
	m = newRefModel(c)
	b = m.begin(now)
	b.addRec(refRec{agg: 0, key: "w", t: 105 * s, v: 10, w: 3})
	b.addRec(refRec{agg: 0, key: "w", t: 106 * s, v: 1})
	b.addRec(refRec{agg: 0, key: "w", t: 135 * s, v: 1}) // W = 135: [100, 130) fires
	b.end()
	got = m.collect(now)
	if len(got) != 3 {
		t.Fatalf("weighted firings: %+v", got)
	}
	for i, f := range got {
		if f.Start != int64(80+10*i)*s || f.Count != 4 || f.ValueCount != 4 || f.Sum != 31 || f.Avg != 7.75 ||
			f.Min != 1 || f.Max != 10 || f.Quantiles[0] != 10 {
			t.Fatalf("weighted firing %d: %+v", i, f)
		}
	}

	// idle rule
	c2 := &modelConfig{size: 10 * time.Second, idle: 10 * time.Second, ooo: 2 * time.Second, skew: time.Minute, aggs: []Aggregation{{}}}
	m = newRefModel(c2)
	b = m.begin(now)
	b.add(0, "a", 5*s, 1)
	b.end() // W = 3
	m.collect(now + 9*s)
	if m.watermark() != 3*s {
		t.Fatalf("idle too early: W=%d", m.watermark())
	}
	if got := m.collect(now + 11*s); len(got) != 1 || m.watermark() != 14*s {
		t.Fatalf("idle: W=%d, %+v", m.watermark(), got)
	}
	// restart: the idle rule counts from the restore and advances from the restored W
	b = m.begin(now + 20*s)
	b.add(0, "a", now+15*s, 1)
	b.end() // W = 1013
	m.snapshot(now + 20*s)
	m.restore(now + 120*s)
	if m.collect(now + 125*s); m.watermark() != now+13*s {
		t.Fatalf("idle after a restart, 5 s after it: W=%d, want %d", m.watermark(), now+13*s)
	}
	if m.collect(now + 132*s); m.watermark() != now+25*s { // 1013 + 12
		t.Fatalf("idle after a restart, 12 s after it: W=%d, want %d", m.watermark(), now+25*s)
	}

	// the clamp: a record 2 minutes ahead of the clock holds W at the clock
	c3 := &modelConfig{size: 10 * time.Second, ooo: 2 * time.Second, skew: 5 * time.Minute, aggs: []Aggregation{{}}}
	m = newRefModel(c3)
	b = m.begin(now)
	if v := b.add(0, "a", now+125*s, 1); v != OnTime {
		t.Fatalf("record ahead of the clock: %v", v)
	}
	b.end()
	if m.watermark() != now-2*s {
		t.Fatalf("clamp: W=%d, want %d", m.watermark(), now-2*s)
	}
	if m.collect(now + 50*s); m.watermark() != now+48*s {
		t.Fatalf("clamp 50 s on: W=%d, want %d", m.watermark(), now+48*s)
	}
	b = m.begin(now + 140*s)
	b.add(0, "a", now+134*s, 1)
	b.end() // W = min(1134, 1140) - 2 = 1132: [1120, 1130) fires
	if got := m.collect(now + 140*s); m.watermark() != now+132*s || len(got) != 1 || got[0].Start != now+120*s || got[0].Count != 1 {
		t.Fatalf("clamp at 1140 s: W=%d, %+v", m.watermark(), got)
	}

	// per_source: a source 90 s behind holds W until it has been silent for source_idle_timeout
	c4 := &modelConfig{size: 10 * time.Second, skew: time.Minute, perSource: true, sourceIdle: 30 * time.Second,
		maxSources: 4, aggs: []Aggregation{{}}}
	m = newRefModel(c4)
	b = m.begin(now)
	b.source("a")
	b.add(0, "k", now, 1)
	b.source("b")
	b.add(0, "k", now-90*s, 1)
	b.end()
	if m.watermark() != now-90*s {
		t.Fatalf("per_source: W=%d, want %d", m.watermark(), now-90*s)
	}
	b = m.begin(now + 10*s)
	b.source("a")
	b.add(0, "k", now+10*s, 1)
	b.end()
	if m.collect(now + 29*s); m.watermark() != now-90*s {
		t.Fatalf("per_source, b silent for 29 s: W=%d, want %d", m.watermark(), now-90*s)
	}
	if m.collect(now + 30*s); m.watermark() != now+10*s {
		t.Fatalf("per_source, b silent for 30 s: W=%d, want %d", m.watermark(), now+10*s)
	}
	// A restart: both held sources count as heard from at the restore.
	b = m.begin(now + 31*s)
	b.source("b")
	b.add(0, "k", now+20*s, 1) // b again, 11 s behind
	b.end()
	m.snapshot(now + 31*s)
	m.restore(now + 200*s)
	b = m.begin(now + 210*s)
	b.source("a")
	b.add(0, "k", now+210*s, 1)
	b.end()
	if m.collect(now + 229*s); m.watermark() != now+20*s {
		t.Fatalf("per_source after a restart: W=%d, want %d (b held since the restore)", m.watermark(), now+20*s)
	}
	if m.collect(now + 230*s); m.watermark() != now+210*s {
		t.Fatalf("per_source after a restart, b silent for 30 s: W=%d, want %d", m.watermark(), now+210*s)
	}

	// max_sources 1: b and c share a source, whose event time is the greater of theirs
	c5 := *c4
	c5.maxSources = 1
	m = newRefModel(&c5)
	b = m.begin(now)
	if b.source("a") || !b.source("b") {
		t.Fatal("max_sources 1: a has a place of its own, b shares")
	}
	b.add(0, "k", now-50*s, 1)
	b.source("c")
	b.add(0, "k", now-10*s, 1)
	b.source("a")
	b.add(0, "k", now, 1)
	b.end()
	if m.watermark() != now-10*s {
		t.Fatalf("shared source: W=%d, want %d", m.watermark(), now-10*s)
	}
}
