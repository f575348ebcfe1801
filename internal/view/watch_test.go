package view

import (
	"fmt"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// The watch, fed results by hand: a late firing adds to its window, only watchedWindows windows are
// kept, past maxWatched the series asked about longest ago gives way, and after watchFor without a
// question a series is forgotten and the watch costs nothing again.
func TestSeriesWatch(t *testing.T) {
	var w Watch
	fire := func(key string, end, count int64, late bool) {
		r := &stream.Result{Agg: 0, Key: key, Start: (end - 10) * 1e9, End: end * 1e9, Count: uint64(count), Sum: float64(count), HasWindow: true}
		if !late {
			r.WindowValueCount, r.Avg, r.Min, r.Max = uint64(count), 1, 1, 1
		}
		w.Observe(r)
	}
	t0 := time.Unix(1000, 0)
	fire("a", 10, 3, false) // nobody asked yet: not kept
	if w.active.Load() {
		t.Fatal("active before any question")
	}
	if last, since := w.Ask(0, map[string]string{"k": "x"}, "", false, t0); last != nil || since != nil || w.active.Load() {
		t.Fatalf("a series not held is kept: %v %v", last, since)
	}
	if last, since := w.Ask(0, map[string]string{"k": "a"}, "a", true, t0); len(last) != 0 || since == nil || !since.Equal(t0) {
		t.Fatalf("first question: %v %v", last, since)
	}
	fire("a", 20, 3, false)
	fire("b", 20, 5, false)
	fire("a", 20, 2, true)
	for end := int64(30); end <= 150; end += 10 {
		fire("a", end, end/10, false)
	}
	last, _ := w.Ask(0, map[string]string{"k": "a"}, "a", false, t0.Add(time.Minute)) // no longer held: still kept
	if len(last) != watchedWindows || last[0].End.Unix() != 40 || last[len(last)-1].End.Unix() != 150 || last[len(last)-1].Records != 15 {
		t.Fatalf("kept %d windows, %v to %v", len(last), last[0].End, last[len(last)-1].End)
	}
	// [10,20) had a late firing, and is no longer kept: check it on a series of its own.
	w.Ask(0, map[string]string{"k": "c"}, "c", true, t0.Add(time.Minute))
	fire("c", 20, 3, false)
	fire("c", 20, 2, true)
	if last, _ := w.Ask(0, map[string]string{"k": "c"}, "c", true, t0.Add(time.Minute)); len(last) != 1 || last[0].Records != 5 || last[0].Sum != 5 ||
		last[0].LateFirings != 1 || *last[0].Avg != 1 {
		t.Errorf("c with a late firing: %+v", last)
	}
	for i := range maxWatched {
		k := fmt.Sprint("s", i)
		w.Ask(0, map[string]string{"k": k}, k, true, t0.Add(2*time.Minute+time.Duration(i)*time.Second))
	}
	if len(w.series) != maxWatched {
		t.Fatalf("%d series watched, want %d", len(w.series), maxWatched)
	}
	for _, ws := range w.series {
		if ws.values["k"] == "a" || ws.values["k"] == "c" {
			t.Errorf("%s, asked about longest ago, was not given up", ws.values["k"])
		}
	}
	w.ForgetStale(t0.Add(2*time.Minute + maxWatched*time.Second + watchFor))
	if len(w.series) != 0 || w.active.Load() {
		t.Errorf("%d series left after watchFor without a question", len(w.series))
	}
}

// A watched series keeps the gauges that Gauges names for each window, a late firing's (corrected)
// replacing the first's.
func TestSeriesWatchKeepsGauges(t *testing.T) {
	w := Watch{Gauges: func(r *stream.Result, put func(string, float64)) { put("stdvar", r.Values[0]) }}
	w.Ask(0, map[string]string{"k": "a"}, "a", true, time.Unix(1000, 0))
	w.Observe(&stream.Result{Key: "a", Start: 0, End: 10e9, Count: 2, HasWindow: true, Values: []float64{1}})
	w.Observe(&stream.Result{Key: "a", Start: 0, End: 10e9, Count: 1, HasWindow: true, Values: []float64{8.0 / 3}})
	last, _ := w.Ask(0, map[string]string{"k": "a"}, "a", true, time.Unix(1000, 0))
	if len(last) != 1 || last[0].Records != 3 || last[0].Outputs["stdvar"] != 8.0/3 || len(last[0].Outputs) != 1 {
		t.Fatalf("kept %+v, want one window of 3 records with stdvar 8/3", last)
	}
}
