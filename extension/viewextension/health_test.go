package viewextension

import (
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The health strip's figures, worked out by hand. Readings a second apart, late records routed
// 0, 0, 10, 20, 30, 40, 50, 60 and dropped 0, then 7 from the fourth: over the last 5 readings
// (60 - 10) / 5 s = 10 routed a second, (7 - 0) / 5 s = 1.4 dropped a second. Sources: b holds W
// back at 100 s, the next, a, is at 102.5 s: 2.5 s behind. Tied sources: none holds W back, 30
// are at W, 4 listed. Before two readings: no rate. W held by the clock (sources stamping ahead of
// it, all clamped alike): no source is named.
func TestHealth(t *testing.T) {
	at := func(s float64) *time.Time { t := time.Unix(0, int64(s*1e9)).UTC(); return &t }
	var samples []view.ComponentSample
	for i, routed := range []int64{0, 0, 10, 20, 30, 40, 50, 60} {
		s := view.ComponentSample{WallClock: *at(float64(1000 + i)), LateRecords: view.LateCounts{Routed: routed}}
		if i >= 3 {
			s.LateRecords.Dropped = 7
		}
		samples = append(samples, s)
	}
	lag := 4.0
	v := view.ComponentView{WatermarkLagSeconds: &lag, HeldBy: "source", Sources: []view.SourceView{
		{Source: map[string]string{"host": "b"}, Watermark: at(100), HoldsBack: true},
		{Source: map[string]string{"host": "a"}, Watermark: at(102.5)},
		{Source: map[string]string{"host": "c"}, Watermark: at(90), Idle: true},
	}}
	h := healthOf(&v, samples)
	if h.Holder["host"] != "b" || h.HolderBehindSeconds == nil || *h.HolderBehindSeconds != 2.5 || h.TiedSources != 0 ||
		h.LateRoutedPerSecond != 10 || h.LateDroppedPerSecond != 1.4 || h.LatePassedPerSecond != 0 {
		t.Errorf("health %+v, want b holding W 2.5 s behind a, 10 routed and 1.4 dropped a second", h)
	}
	v.Sources, v.SourcesAtW = []view.SourceView{{Watermark: at(100), AtW: true}, {Watermark: at(100.2), AtW: true}, {Watermark: at(100.3), AtW: true}, {Watermark: at(100.4), AtW: true}}, 30
	if h := healthOf(&v, samples[:1]); h.Holder != nil || h.HolderBehindSeconds != nil || h.TiedSources != 30 || h.LateRoutedPerSecond != 0 {
		t.Errorf("tied sources, one reading: %+v, want no holder, 30 tied, no rate", h)
	}
	v.SourcesAtW = 0
	v.Sources[0].AtW, v.Sources[0].HoldsBack = false, true
	v.HeldBy = "clock"
	if h := healthOf(&v, nil); h.Holder != nil || h.HolderBehindSeconds != nil || h.TiedSources != 0 {
		t.Errorf("W held by the clock: %+v, want no source named", h)
	}
	v.HeldBy = "source"
	v.Sources = []view.SourceView{{Shared: true, Watermark: at(100), HoldsBack: true}, {Source: map[string]string{"host": "a"}, Watermark: at(101), Idle: true}}
	if h := healthOf(&v, nil); !h.HolderIsShared || h.Holder != nil || h.HolderBehindSeconds != nil {
		t.Errorf("the shared source holding W, the next idle: %+v, want the shared source and no distance", h)
	}
}
