package view

import (
	"errors"
	"testing"
)

// fakeSource is a Source that says its id and what it was asked.
type fakeSource struct {
	id    string
	asked []string
}

func (f *fakeSource) ID() string                 { return f.id }
func (f *fakeSource) View(top int) ComponentView { return ComponentView{ID: f.id, SourcesTotal: top} }
func (f *fakeSource) Sample() ComponentSample    { return ComponentSample{ID: f.id} }
func (f *fakeSource) Explain(name string, _ map[string]string) (SeriesExplanation, error) {
	f.asked = append(f.asked, name)
	if name != "lat" {
		return SeriesExplanation{}, errors.New("no such aggregation")
	}
	return SeriesExplanation{Component: f.id, Aggregation: name}, nil
}

func TestRegistryListsRunningSourcesByID(t *testing.T) {
	b, a := &fakeSource{id: "window_aggregator/b"}, &fakeSource{id: "window_aggregator"}
	Register(b)
	Register(a)
	t.Cleanup(func() { Unregister(a); Unregister(b) })

	views := Views(7)
	if len(views) != 2 || views[0].ID != "window_aggregator" || views[1].ID != "window_aggregator/b" || views[0].SourcesTotal != 7 {
		t.Fatalf("Views(7) = %+v, want a then b, each asked with top 7", views)
	}
	if s := Samples(); len(s) != 2 || s[0].ID != "window_aggregator" || s[1].ID != "window_aggregator/b" {
		t.Fatalf("Samples() = %+v, want a then b", s)
	}
	ex, err := Explain("window_aggregator/b", "lat", nil)
	if err != nil || ex.Component != "window_aggregator/b" || len(b.asked) != 1 || len(a.asked) != 0 {
		t.Fatalf("Explain of b = %+v, %v; b asked %v, a asked %v", ex, err, b.asked, a.asked)
	}
	if _, err := Explain("window_aggregator/b", "other", nil); err == nil {
		t.Fatal("the source's error is not returned")
	}
	if _, err := Explain("window_aggregator/c", "lat", nil); err == nil {
		t.Fatal("Explain of a component id that is not running gives no error")
	}
}

func TestUnregisterRemovesOnlyTheSourceRegistered(t *testing.T) {
	old, replacement := &fakeSource{id: "window_aggregator"}, &fakeSource{id: "window_aggregator"}
	Register(old)
	Register(replacement) // registered under the same id after old
	Unregister(old)
	if v := Views(1); len(v) != 1 {
		t.Fatalf("after the old source stopped, Views = %+v, want the replacement", v)
	}
	Unregister(replacement)
	if v := Views(1); len(v) != 0 {
		t.Fatalf("after both stopped, Views = %+v, want none", v)
	}
}
