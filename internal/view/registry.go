package view

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Source is one running window_aggregator component id, as the view reads it. Its methods copy
// figures: none holds a lock of the component's ingest path for longer than a copy.
type Source interface {
	// ID is the component id, as the collector's configuration names it.
	ID() string
	// View reads the component id's figures, with at most top sources and windows.
	View(top int) ComponentView
	// Sample reads the few figures the view's history keeps, and forgets the series that the
	// explainer was not asked about for a while.
	Sample() ComponentSample
	// Explain finds the series of aggregation name whose group_by values are values, or says why
	// there is none.
	Explain(name string, values map[string]string) (SeriesExplanation, error)
}

// The running sources, by id: a component id registers when it starts and unregisters when its
// last instance shuts down. mu is taken alone.
var (
	mu      sync.Mutex
	sources = map[string]Source{}
)

// Register adds a running component id.
func Register(s Source) {
	mu.Lock()
	defer mu.Unlock()
	sources[s.ID()] = s
}

// Unregister removes a component id that stopped, if s is the one registered under its id.
func Unregister(s Source) {
	mu.Lock()
	defer mu.Unlock()
	if sources[s.ID()] == s {
		delete(sources, s.ID())
	}
}

// running returns the registered sources, by id.
func running() []Source {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Source, 0, len(sources))
	for _, id := range slices.Sorted(maps.Keys(sources)) {
		out = append(out, sources[id])
	}
	return out
}

// Views returns every running window_aggregator component id of this process, by id, with at most
// top sources and windows each.
func Views(top int) []ComponentView {
	srcs := running()
	views := make([]ComponentView, 0, len(srcs))
	for _, s := range srcs {
		views = append(views, s.View(top))
	}
	return views
}

// Samples returns a ComponentSample of every running window_aggregator component id, by id: a
// reading cheaper than Views, for a history taken every second.
func Samples() []ComponentSample {
	srcs := running()
	out := make([]ComponentSample, 0, len(srcs))
	for _, s := range srcs {
		out = append(out, s.Sample())
	}
	return out
}

// Explain finds the series of aggregation name, of component id, whose group_by values are values
// (every group_by key named, as text; a key left out matches a record that lacked it).
func Explain(id, name string, values map[string]string) (SeriesExplanation, error) {
	mu.Lock()
	s := sources[id]
	mu.Unlock()
	if s == nil {
		return SeriesExplanation{}, fmt.Errorf("no window_aggregator component %q is running", id)
	}
	return s.Explain(name, values)
}
