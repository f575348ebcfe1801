package windowaggregator

import (
	"context"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	yaml "go.yaml.in/yaml/v3"

	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/internal/metadatatest"
)

// componentMetadata is what the tests read of a metadata.yaml.
type componentMetadata struct {
	Type           string `yaml:"type"`
	DeprecatedType string `yaml:"deprecated_type"`
	Telemetry      struct {
		Metrics map[string]telemetryMetric `yaml:"metrics"`
	} `yaml:"telemetry"`
}

type telemetryMetric struct {
	Stability   string `yaml:"stability"`
	Description string `yaml:"description"`
	Unit        string `yaml:"unit"`
	Sum         *struct {
		ValueType string `yaml:"value_type"`
		Monotonic bool   `yaml:"monotonic"`
		Async     bool   `yaml:"async"`
	} `yaml:"sum"`
	Gauge *struct {
		ValueType string `yaml:"value_type"`
		Async     bool   `yaml:"async"`
	} `yaml:"gauge"`
	Histogram *struct {
		ValueType string `yaml:"value_type"`
	} `yaml:"histogram"`
}

// instrument is the otel API instrument the metric declares, e.g. Int64ObservableCounter.
func (m telemetryMetric) instrument() string {
	valueType := func(v string) string {
		if v == "double" {
			return "Float64"
		}
		return "Int64"
	}
	switch {
	case m.Sum != nil:
		kind := "UpDownCounter"
		if m.Sum.Monotonic {
			kind = "Counter"
		}
		if m.Sum.Async {
			kind = "Observable" + kind
		}
		return valueType(m.Sum.ValueType) + kind
	case m.Gauge != nil:
		kind := "Gauge"
		if m.Gauge.Async {
			kind = "ObservableGauge"
		}
		return valueType(m.Gauge.ValueType) + kind
	case m.Histogram != nil:
		return valueType(m.Histogram.ValueType) + "Histogram"
	}
	return "unknown"
}

func readMetadata(t *testing.T, path string) componentMetadata {
	t.Helper()
	raw, err := os.ReadFile(path)
	must(t, err)
	var md componentMetadata
	must(t, yaml.Unmarshal(raw, &md))
	return md
}

// Both metadata files name the component's types; the telemetry is declared once, in the root's.
func TestMetadataFiles(t *testing.T) {
	for _, path := range []string{"metadata.yaml", "connector/metadata.yaml"} {
		md := readMetadata(t, path)
		if md.Type != Type.String() || md.DeprecatedType != aliasType.String() {
			t.Errorf("%s: type %q alias %q, want %q %q", path, md.Type, md.DeprecatedType, Type, aliasType)
		}
		if path != "metadata.yaml" && len(md.Telemetry.Metrics) != 0 {
			t.Errorf("%s declares telemetry: the component's telemetry is declared in metadata.yaml only", path)
		}
	}
	if metadata.Type != Type || metadata.DeprecatedType != aliasType {
		t.Errorf("generated status %v %v, want %v %v (regenerate: make generate)", metadata.Type, metadata.DeprecatedType, Type, aliasType)
	}
	f := NewFactory()
	if f.TracesStability() != metadata.TracesStability || f.LogsStability() != metadata.LogsStability ||
		f.MetricsStability() != metadata.MetricsStability {
		t.Error("the processor factory's stability differs from metadata.yaml's")
	}
}

// The README's Self-telemetry section lists every metric of metadata.yaml, by its name after the
// prefix it states.
func TestTelemetryIsListedInReadme(t *testing.T) {
	md := readMetadata(t, "metadata.yaml")
	if len(md.Telemetry.Metrics) == 0 {
		t.Fatal("metadata.yaml declares no telemetry")
	}
	readme, err := os.ReadFile("README.md")
	must(t, err)
	_, section, _ := strings.Cut(string(readme), "\n## Self-telemetry\n")
	section, _, _ = strings.Cut(section, "\n## ")
	const prefix = "window_aggregator_"
	if !strings.Contains(section, "`otelcol_"+prefix+"`") {
		t.Fatalf("the README's Self-telemetry section does not state the prefix otelcol_%s", prefix)
	}
	for key := range md.Telemetry.Metrics {
		if short := strings.TrimPrefix(key, prefix); !strings.Contains(section, "`"+short+"`") {
			t.Errorf("the README's Self-telemetry section does not list %s", short)
		}
	}
}

// The README stays a user's page at contrib's size: span_metrics' is 28.1 KB.
func TestReadmeIsContribSize(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	must(t, err)
	if n := len(readme); n > 28700 {
		t.Errorf("README.md is %d bytes, more than 28700: move explanations to docs/, figures to bench/README.md", n)
	}
}

// The instruments the component registers are metadata.yaml's metrics: names, units, descriptions
// (with mdatagen's stability suffix) and kinds.
func TestRegisteredTelemetryIsMetadatas(t *testing.T) {
	md := readMetadata(t, "metadata.yaml")
	want := map[string]registered{}
	for key, m := range md.Telemetry.Metrics {
		name := "otelcol_" + key
		stability := strings.ToUpper(m.Stability[:1]) + m.Stability[1:]
		want[name] = registered{kind: m.instrument(), scope: metadata.ScopeName, name: name, unit: m.Unit,
			description: m.Description + " [" + stability + "]"}
	}
	got := registeredInstruments(t)
	for _, r := range got {
		t.Logf("%-22s %-48s %-12s %s", r.kind, r.name, r.unit, r.description)
		if w, ok := want[r.name]; !ok {
			t.Errorf("%s is registered but not declared in metadata.yaml", r.name)
		} else if r != w {
			t.Errorf("registered %+v, metadata.yaml declares %+v", r, w)
		}
		delete(want, r.name)
	}
	for name := range want {
		t.Errorf("%s is declared in metadata.yaml but not registered", name)
	}
}

// A counter as the generated helpers read it: the records counter, by outcome.
func TestRecordsCounterWithGeneratedHelpers(t *testing.T) {
	useFakeClock(t)
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans", Where: &WhereConfig{SpanKind: []string{"server"}}}}
	h := newConnectorHarness(t, cfg, false)
	srv, client := ptrace.SpanKindServer, ptrace.SpanKindClient
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1000, ms: 1, kind: srv},
		spanSpec{service: "a", name: "/y", end: 1001, ms: 1, kind: srv}, spanSpec{service: "a", name: "/z", end: 1001, ms: 1, kind: client}))
	metadatatest.AssertEqualWindowAggregatorRecords(t, h.tel, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("outcome", "aggregated"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("outcome", "unmatched"))},
	}, metricdatatest.IgnoreTimestamp())
}

// registered is one instrument as the component created it.
type registered struct{ kind, scope, name, unit, description string }

// registeredInstruments creates a processor through a MeterProvider that records every instrument
// made through it, and returns them sorted by name.
func registeredInstruments(t *testing.T) []registered {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	rec := &recordingProvider{MeterProvider: tel.NewTelemetrySettings().MeterProvider}
	set := processortest.NewNopSettings(Type)
	set.ID = component.NewIDWithName(Type, "registered_instruments")
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.MeterProvider = rec
	cfg := baseConfig()
	cfg.Aggregations = []AggregationConfig{{Name: "n", Signal: "spans"}}
	p, err := NewFactory().CreateTraces(context.Background(), set, cfg, consumertest.NewNop())
	must(t, err)
	must(t, p.Shutdown(context.Background()))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := append([]registered(nil), rec.instruments...)
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// recordingProvider hands out meters that note every instrument created through them, and make it
// with the provider they wrap.
type recordingProvider struct {
	metric.MeterProvider
	mu          sync.Mutex
	instruments []registered
}

func (p *recordingProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return &recordingMeter{Meter: p.MeterProvider.Meter(name, opts...), p: p, scope: name}
}

type recordingMeter struct {
	metric.Meter
	p     *recordingProvider
	scope string
}

func (m *recordingMeter) note(kind, name, unit, description string) {
	m.p.mu.Lock()
	defer m.p.mu.Unlock()
	m.p.instruments = append(m.p.instruments, registered{kind: kind, scope: m.scope, name: name, unit: unit, description: description})
}

func (m *recordingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := metric.NewInt64CounterConfig(opts...)
	m.note("Int64Counter", name, c.Unit(), c.Description())
	return m.Meter.Int64Counter(name, opts...)
}

func (m *recordingMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	c := metric.NewInt64UpDownCounterConfig(opts...)
	m.note("Int64UpDownCounter", name, c.Unit(), c.Description())
	return m.Meter.Int64UpDownCounter(name, opts...)
}

func (m *recordingMeter) Int64Histogram(name string, opts ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	c := metric.NewInt64HistogramConfig(opts...)
	m.note("Int64Histogram", name, c.Unit(), c.Description())
	return m.Meter.Int64Histogram(name, opts...)
}

func (m *recordingMeter) Int64Gauge(name string, opts ...metric.Int64GaugeOption) (metric.Int64Gauge, error) {
	c := metric.NewInt64GaugeConfig(opts...)
	m.note("Int64Gauge", name, c.Unit(), c.Description())
	return m.Meter.Int64Gauge(name, opts...)
}

func (m *recordingMeter) Int64ObservableCounter(name string, opts ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	c := metric.NewInt64ObservableCounterConfig(opts...)
	m.note("Int64ObservableCounter", name, c.Unit(), c.Description())
	return m.Meter.Int64ObservableCounter(name, opts...)
}

func (m *recordingMeter) Int64ObservableUpDownCounter(name string, opts ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	c := metric.NewInt64ObservableUpDownCounterConfig(opts...)
	m.note("Int64ObservableUpDownCounter", name, c.Unit(), c.Description())
	return m.Meter.Int64ObservableUpDownCounter(name, opts...)
}

func (m *recordingMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	c := metric.NewInt64ObservableGaugeConfig(opts...)
	m.note("Int64ObservableGauge", name, c.Unit(), c.Description())
	return m.Meter.Int64ObservableGauge(name, opts...)
}

func (m *recordingMeter) Float64Counter(name string, opts ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	c := metric.NewFloat64CounterConfig(opts...)
	m.note("Float64Counter", name, c.Unit(), c.Description())
	return m.Meter.Float64Counter(name, opts...)
}

func (m *recordingMeter) Float64UpDownCounter(name string, opts ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	c := metric.NewFloat64UpDownCounterConfig(opts...)
	m.note("Float64UpDownCounter", name, c.Unit(), c.Description())
	return m.Meter.Float64UpDownCounter(name, opts...)
}

func (m *recordingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c := metric.NewFloat64HistogramConfig(opts...)
	m.note("Float64Histogram", name, c.Unit(), c.Description())
	return m.Meter.Float64Histogram(name, opts...)
}

func (m *recordingMeter) Float64Gauge(name string, opts ...metric.Float64GaugeOption) (metric.Float64Gauge, error) {
	c := metric.NewFloat64GaugeConfig(opts...)
	m.note("Float64Gauge", name, c.Unit(), c.Description())
	return m.Meter.Float64Gauge(name, opts...)
}

func (m *recordingMeter) Float64ObservableCounter(name string, opts ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	c := metric.NewFloat64ObservableCounterConfig(opts...)
	m.note("Float64ObservableCounter", name, c.Unit(), c.Description())
	return m.Meter.Float64ObservableCounter(name, opts...)
}

func (m *recordingMeter) Float64ObservableUpDownCounter(name string, opts ...metric.Float64ObservableUpDownCounterOption) (metric.Float64ObservableUpDownCounter, error) {
	c := metric.NewFloat64ObservableUpDownCounterConfig(opts...)
	m.note("Float64ObservableUpDownCounter", name, c.Unit(), c.Description())
	return m.Meter.Float64ObservableUpDownCounter(name, opts...)
}

func (m *recordingMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	c := metric.NewFloat64ObservableGaugeConfig(opts...)
	m.note("Float64ObservableGauge", name, c.Unit(), c.Description())
	return m.Meter.Float64ObservableGauge(name, opts...)
}
