package windowaggregator

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// resourcesOf lists, per output resource, its attributes and the names of its metrics:
// "k=v,k=v: metric metric".
func resourcesOf(all []pmetric.Metrics) []string {
	var out []string
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			var attrs, names []string
			rm.Resource().Attributes().Range(func(k string, v pcommon.Value) bool {
				attrs = append(attrs, k+"="+v.AsString())
				return true
			})
			for j := 0; j < rm.ScopeMetrics().Len(); j++ {
				ms := rm.ScopeMetrics().At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					names = append(names, ms.At(k).Name())
				}
			}
			sort.Strings(attrs)
			sort.Strings(names)
			out = append(out, strings.Join(attrs, ",")+": "+strings.Join(names, " "))
		}
	}
	sort.Strings(out)
	return out
}

// Every output resource names the collector that computed it by its service.instance.id, taken from
// the collector's own telemetry resource, unless the aggregation groups by that key, whose value then
// comes from the records; the two kinds never share a resource.
func TestOutputsCarryTheCollectorsInstanceID(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{
		{Name: "by_service", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count"}},
		{Name: "by_host", Signal: "spans", GroupBy: keys("service.name", "service.instance.id"), Outputs: []string{"count"}},
	}
	for _, collectorID := range []string{"collector-1", ""} {
		t.Run("collector id "+collectorID, func(t *testing.T) {
			sink := new(consumertest.MetricsSink)
			set := connectortest.NewNopSettings(Type)
			set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
			if collectorID != "" {
				set.Resource.Attributes().PutStr("service.instance.id", collectorID)
			}
			c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, sink)
			must(t, err)
			must(t, c.Start(context.Background(), componenttest.NewNopHost()))
			must(t, c.ConsumeTraces(context.Background(), withInstance(traces(
				spanSpec{service: "a", name: "/x", end: 1, ms: 1},
				spanSpec{service: "a", name: "/x", end: 11, ms: 1}), "host-7")))
			settleAll(t)
			got := resourcesOf(sink.AllMetrics())
			want := []string{
				"service.instance.id=" + collectorID + ",service.name=a: by_service.count",
				"service.instance.id=host-7,service.name=a: by_host.count",
			}
			if collectorID == "" { // a collector without one: nothing is made up
				want[0] = "service.name=a: by_service.count"
			}
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("output resources:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			must(t, c.Shutdown(context.Background()))
		})
	}
}

// With storage, the restored series go on under the service.instance.id they were written with, also
// when the collector restarts with another (by default it makes up a new one at each start): else the
// backend would see each of them as a new series beside the old one.
func TestRestoredSeriesKeepTheirInstanceID(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Storage = &storageID
	cfg.Aggregations = []AggregationConfig{{Name: "lat", Signal: "spans", GroupBy: keys("service.name"), Outputs: []string{"count"}}}
	st := &memStorage{data: map[string][]byte{}}
	run := func(collectorID string, specs ...spanSpec) []string {
		return resourcesOf(runAsCollector(t, cfg, st, collectorID, specs...).AllMetrics())
	}
	if got := run("first", spanSpec{service: "a", name: "/x", end: 1, ms: 1}); len(got) != 0 {
		t.Fatalf("the window [0,10) fired before its end: %v", got)
	}
	got := run("second", spanSpec{service: "a", name: "/x", end: 11, ms: 1})
	if want := "service.instance.id=first,service.name=a: lat.count"; len(got) == 0 || got[0] != want {
		t.Errorf("after the restart, output resources %v, want %q", got, want)
	}
	delete(st.data, checkpoint.Key) // no checkpoint: the collector's own id
	got = run("third", spanSpec{service: "a", name: "/x", end: 21, ms: 1}, spanSpec{service: "a", name: "/x", end: 31, ms: 1})
	if want := "service.instance.id=third,service.name=a: lat.count"; len(got) == 0 || got[0] != want {
		t.Errorf("without a checkpoint, output resources %v, want %q", got, want)
	}
}

// runAsCollector runs a traces->metrics connector of cfg, with storage st, in a collector whose
// service.instance.id is collectorID, from start to shutdown with one batch of specs, and returns
// what it emitted.
func runAsCollector(t *testing.T, cfg *Config, st *memStorage, collectorID string, specs ...spanSpec) *consumertest.MetricsSink {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	set := connectortest.NewNopSettings(Type)
	set.TelemetrySettings = componenttest.NewNopTelemetrySettings()
	set.Resource.Attributes().PutStr("service.instance.id", collectorID)
	c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, sink)
	must(t, err)
	must(t, c.Start(context.Background(), hostWith{storageID: st}))
	must(t, c.ConsumeTraces(context.Background(), traces(specs...)))
	settleAll(t)
	must(t, c.Shutdown(context.Background()))
	return sink
}
