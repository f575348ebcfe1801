package viewextension

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The history the page's charts draw: the extension reads every component id each sampleEvery
// (view.Samples, a copy of a few figures) and keeps the last historyLength readings of
// each, so that a page opened now shows the last minutes, not only what it has polled since.
const (
	sampleEvery   = time.Second
	historyLength = 300
)

// ComponentHistory is one component id's readings, earliest first (GET /api/v1/history).
type ComponentHistory struct {
	ID      string                 `json:"id"`
	Samples []view.ComponentSample `json:"samples"`
}

// history holds the readings by component id; an id that is no longer running is dropped once it
// has been absent for historyLength readings.
type history struct {
	mu   sync.Mutex
	byID map[string]*componentReadings
}

type componentReadings struct {
	samples []view.ComponentSample
	absent  int // readings since it was last seen
}

func newHistory() *history { return &history{byID: map[string]*componentReadings{}} }

// add takes one reading of every running component id.
func (h *history) add(samples []view.ComponentSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := make(map[string]bool, len(samples))
	for _, s := range samples {
		seen[s.ID] = true
		c := h.byID[s.ID]
		if c == nil {
			c = &componentReadings{}
			h.byID[s.ID] = c
		}
		// A component id restarted with other aggregations starts its history again.
		if n := len(c.samples); n > 0 && !sameKeys(c.samples[n-1].Records, s.Records) {
			c.samples = c.samples[:0]
		}
		if len(c.samples) == historyLength {
			c.samples = slices.Delete(c.samples, 0, 1)
		}
		c.samples, c.absent = append(c.samples, s), 0
	}
	for id, c := range h.byID {
		if !seen[id] {
			if c.absent++; c.absent >= historyLength {
				delete(h.byID, id)
			}
		}
	}
}

// sameKeys reports whether a and b hold the same aggregations.
func sameKeys(a, b map[string]view.RecordCounts) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// read returns a copy of the readings taken after since (all of them for the zero time), by id.
func (h *history) read(since time.Time) []ComponentHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]ComponentHistory, 0, len(h.byID))
	for id, c := range h.byID {
		from, _ := slices.BinarySearchFunc(c.samples, since, func(s view.ComponentSample, t time.Time) int {
			if s.WallClock.After(t) {
				return 1
			}
			return -1
		})
		out = append(out, ComponentHistory{ID: id, Samples: slices.Clone(c.samples[from:])})
	}
	slices.SortFunc(out, func(a, b ComponentHistory) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// recent returns a copy of component id's last n readings at most.
func (h *history) recent(id string, n int) []view.ComponentSample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.byID[id]; c != nil {
		return slices.Clone(c.samples[max(0, len(c.samples)-n):])
	}
	return nil
}

// views reads the components (view.Views) with their health, from their readings.
func (h *history) views(top int) []view.ComponentView {
	vs := view.Views(top)
	for i := range vs {
		vs[i].Health = healthOf(&vs[i], h.recent(vs[i].ID, rateSpan+1))
	}
	return vs
}

// sample reads the components every tick until stop is closed.
func (h *history) sample(tick <-chan time.Time, stop <-chan struct{}) {
	h.add(view.Samples())
	for {
		select {
		case <-stop:
			return
		case <-tick:
			h.add(view.Samples())
		}
	}
}
