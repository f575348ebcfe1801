package windowaggregator

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cfg, err := readConfig(t, name)
	if err != nil {
		t.Fatalf("unmarshal %s: %v", name, err)
	}
	return cfg
}

// readConfig reads configuration name of testdata/config.yaml, and the error of reading it: a value
// outside an enumeration fails there (see enums.go).
func readConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	id := component.NewIDWithName(Type, name).String()
	if !cm.IsSet(id) { // Sub would give an empty map, and the test the defaults
		t.Fatalf("testdata/config.yaml has no %s", id)
	}
	sub, err := cm.Sub(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg := createDefaultConfig().(*Config)
	return cfg, sub.Unmarshal(cfg)
}

func TestDefaultsAreThoseOfTheContract(t *testing.T) {
	cfg := loadConfig(t, "minimal")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Window.Size != time.Minute || cfg.Window.Slide != 0 || cfg.Watermark.MaxOutOfOrderness != 0 ||
		cfg.Watermark.IdleTimeout != 0 || cfg.Watermark.MaxFutureSkew != 5*time.Minute || cfg.AllowedLateness != 0 ||
		cfg.LateData.Action != "route" || cfg.MaxSeries != 10000 || cfg.Storage != nil ||
		cfg.Temporality != "cumulative" || cfg.LateFirings != "fold" || cfg.SeriesExpiration != 5*time.Minute ||
		len(cfg.Watermark.PerSource) != 0 || cfg.Watermark.SourceIdleTimeout != time.Minute || cfg.Watermark.MaxSources != 1000 {
		t.Fatalf("defaults: %+v", cfg)
	}
	a, err := compileAggregation(0, cfg.Aggregations[0], ingest.NewOTTLParsers(ingest.ValidationSettings))
	if err != nil {
		t.Fatal(err)
	}
	if !a.Duration || a.Unit != "ms" || !delivery.Has(a.Outputs, "count") || delivery.Has(a.Outputs, "sum") || len(a.Quantiles) != 0 || len(a.GroupBy) != 0 ||
		a.HistMax != 160 || a.Exemplars != 0 {
		t.Fatalf("aggregation defaults (value duration, unit ms, outputs [count], no group_by, histogram_max_size 160, no exemplars): %+v", a)
	}
	if n := (ExemplarsConfig{Enabled: true}).perPoint(); n != 5 {
		t.Fatalf("exemplars enabled without max_per_data_point: %d a point, want 5", n)
	}
	if a.Weight != ingest.WeighAdjustedCount {
		t.Fatalf("spans weigh by adjusted count by default; weight %v", a.Weight)
	}
	logsAgg, err := compileAggregation(0, AggregationConfig{Name: "l", Signal: "logs"}, ingest.NewOTTLParsers(ingest.ValidationSettings))
	if err != nil || logsAgg.Weight != ingest.WeighNone {
		t.Fatalf("logs weigh 1 by default; weight %v (%v)", logsAgg.Weight, err)
	}
}

func TestFullConfigLoads(t *testing.T) {
	cfg := loadConfig(t, "full")
	if err := confmap.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Window.Slide != 15*time.Second || cfg.Storage == nil || cfg.Storage.String() != "file_storage/wa" ||
		len(cfg.Aggregations) != 4 || cfg.Aggregations[0].Where.Attributes["http.request.method"] != "GET" ||
		cfg.Aggregations[0].Histogram.Exponential.MaxSize != 320 || cfg.Temporality != "delta" || cfg.LateFirings != "revise" ||
		cfg.Aggregations[0].Weight != "none" || cfg.Aggregations[3].Weight != "attribute:sample.rate" ||
		cfg.ErrorMode != "propagate" || len(cfg.Aggregations[0].Where.Conditions) != 1 || cfg.Aggregations[0].GroupBy[3].Default != "unmatched" ||
		cfg.Aggregations[0].GroupBy[4].OTTL == "" || cfg.Aggregations[3].Value.OTTL == "" || cfg.Aggregations[1].GroupBy[0].Key != "service.name" ||
		cfg.SeriesExpiration != 10*time.Minute {
		t.Fatalf("full: %+v", cfg)
	}
	a, err := compileAggregation(0, cfg.Aggregations[0], ingest.NewOTTLParsers(ingest.ValidationSettings))
	if err != nil {
		t.Fatal(err)
	}
	if a.Exemplars != 8 {
		t.Fatalf("exemplars per point %d, want 8", a.Exemplars)
	}
	want := []float64{0.50, 0.95, 0.99, 0.999}
	if len(a.Quantiles) != len(want) {
		t.Fatalf("quantiles %v, want %v", a.Quantiles, want)
	}
	for i := range want {
		if a.Quantiles[i] != want[i] {
			t.Fatalf("quantiles %v, want %v", a.Quantiles, want)
		}
	}
}

// invalidConfigs maps each invalid configuration of testdata/config.yaml to substrings its error must
// hold: Validate's, or, for a value outside an enumeration, reading's.
var invalidConfigs = map[string][]string{
	"no_size":                              {"window.size", "> 0"},
	"slide_too_big":                        {"window.slide", "<= window.size"},
	"slide_not_divisor":                    {"window.slide", "whole multiple"},
	"negative_lateness":                    {"allowed_lateness", "between 0s and 8760h0m0s, got -1s"},
	"negative_out_of_orderness":            {"watermark.max_out_of_orderness", "between 0s and"},
	"bad_action":                           {"late_data.action", `"keep"`},
	"zero_max_series":                      {"max_series", "> 0"},
	"no_aggregations":                      {"aggregations", "at least one"},
	"no_name":                              {"aggregations[0].name", "required"},
	"duplicate_name":                       {"aggregations[1] (a).name", "unique"},
	"bad_signal":                           {"signal", "spans, logs, metrics", `"profiles"`},
	"metrics_without_names":                {"aggregations[0] (a).where.metric_names", "required for signal: metrics"},
	"metric_names_on_spans":                {"aggregations[0] (a).where.metric_names", "signal: metrics only"},
	"duplicate_metric_name":                {"where.metric_names: empty metric name", `where.metric_names: "x" listed twice`},
	"value_on_metrics":                     {"aggregations[0] (a).value", "values of its points"},
	"weight_on_metrics":                    {"aggregations[0] (a).weight", "a metric point counts as itself"},
	"zero_max_input_streams":               {"max_input_streams", "> 0, got 0"},
	"metrics_condition_of_another_context": {"aggregations[0] (a).where.conditions[0]", `"span"`},
	"span_kind_on_logs":                    {"where.span_kind", "spans only"},
	"bad_span_kind":                        {"where.span_kind", `"SERVER"`},
	"duplicate_group_by":                   {"group_by", "twice"},
	"severity_on_spans":                    {"group_by", "logs only"},
	"span_name_on_logs":                    {"group_by", "spans only"},
	"duration_on_logs":                     {"value", "spans only"},
	"bad_value":                            {"value", `"size"`},
	"empty_attribute_value":                {"value", "needs a key"},
	"adjusted_count_on_logs":               {"aggregations[0] (a).weight", "spans only", "no tracestate"},
	"bad_weight":                           {"aggregations[0].weight", `"tracestate"`},
	"empty_attribute_weight":               {"aggregations[0].weight", "needs a key"},
	"condition_does_not_parse":             {"aggregations[0] (a).where.conditions[1]", "invalid syntax"},
	"condition_of_another_context":         {"aggregations[0] (a).where.conditions[0]", `"log"`},
	"condition_without_context":            {"aggregations[0] (a).where.conditions[0]", "context"},
	"group_by_ottl_does_not_parse":         {"aggregations[0] (a).group_by[1]", "invalid syntax"},
	"group_by_unknown_function":            {"aggregations[0] (a).group_by[0]", "NoSuchFunction"},
	"group_by_without_key":                 {"aggregations[0] (a).group_by[0]", "a key is required"},
	"group_by_default_not_scalar":          {"aggregations[0] (a).group_by[0].default", "string, number or bool"},
	"value_ottl_does_not_parse":            {"aggregations[0] (a).value", "nope"},
	"bad_unit":                             {"unit", `"minutes"`},
	"unit_on_attribute":                    {"unit", "duration only"},
	"bad_output":                           {"outputs", `"median"`},
	"value_output_without_value":           {"outputs", `"p99" needs a value`},
	"duplicate_output":                     {"outputs", "twice"},
	"bad_emit_interval":                    {"emit.interval", "> 0"},
	"pending_below_one_send":               {"emit.max_pending_points", "at least emit.max_points_per_send (500), got 100"},
	"bad_histogram_max_size":               {"aggregations[0] (a).histogram.exponential.max_size", "between 2 and 4096"},
	"histogram_without_histogram_output":   {"aggregations[0] (a).histogram", "histogram output only"},
	"both_histograms":                      {"aggregations[0] (a).histogram", "not both"},
	"exemplars_on_logs":                    {"aggregations[0] (a).exemplars", "spans only"},
	"exemplars_without_their_outputs":      {"aggregations[0] (a).exemplars", "histogram and max outputs"},
	"too_many_exemplars":                   {"aggregations[0] (a).exemplars.max_per_data_point", "between 1 and 1000", "got 1001"},
	"no_buckets":                           {"aggregations[0] (a).histogram.explicit.buckets", "at least one"},
	"numbers_for_duration_buckets":         {"histogram.explicit.buckets", "durations, as in 5ms; got 5"},
	"durations_for_attribute_buckets":      {"histogram.explicit.buckets", "numbers; got 5ms"},
	"buckets_not_ascending":                {"histogram.explicit.buckets", "ascending; 5ms comes after 10ms"},
	"bad_temporality":                      {"temporality", `"gauge"`},
	"bad_late_firings":                     {"late_firings", `"drop"`},
	"revise_with_cumulative":               {"late_firings", "revise needs temporality: delta"},
	"zero_series_expiration":               {"series_expiration", "> 0"},
	"too_many_panes":                       {"window.slide", "at most 10000", "1m0s / 1ms = 60000"},
	"empty_per_source_key":                 {"watermark.per_source", "empty key"},
	"duplicate_per_source_key":             {"watermark.per_source", `"host.name" listed twice`},
	"zero_source_idle_timeout":             {"watermark.source_idle_timeout", "> 0"},
	"too_many_sources":                     {"watermark.max_sources", "between 1 and 65535, got 65536"},
}

func TestInvalidConfigsNameKeyAndReason(t *testing.T) {
	for name, want := range invalidConfigs {
		t.Run(name, func(t *testing.T) {
			cfg, err := readConfig(t, name)
			if err == nil {
				err = confmap.Validate(cfg)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Every configuration of testdata/config.yaml is in a test (and loadConfig fails for a test's
// configuration that is not in the file).
func TestEveryTestdataConfigIsCovered(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for id := range cm.ToStringMap() {
		name := strings.TrimPrefix(id, Type.String()+"/")
		if _, ok := invalidConfigs[name]; !ok && name != "minimal" && name != "full" {
			t.Errorf("testdata/config.yaml: %s is in no test", id)
		}
	}
}

// Config.Validate reports the same errors in the same order every time.
func TestValidateErrorsComeInAStableOrder(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Watermark.MaxOutOfOrderness, cfg.Watermark.IdleTimeout, cfg.Watermark.MaxFutureSkew = -1, -1, -1
	cfg.AllowedLateness, cfg.Checkpoint.Interval = -1, -1
	cfg.Aggregations = []AggregationConfig{{Name: "a", Signal: "spans", Where: &WhereConfig{Attributes: map[string]any{"": 1, "b": []int{1}, "c": struct{}{}}}}}
	first := cfg.Validate().Error()
	for range 50 {
		if got := cfg.Validate().Error(); got != first {
			t.Fatalf("errors in another order:\n%s\nthen\n%s", first, got)
		}
	}
}

// Each enumeration of the configuration refuses a value outside it where the configuration is read,
// naming the key and the value; Validate refuses it too in a configuration built in code.
func TestEnumerationsRefuseBadValuesWhereRead(t *testing.T) {
	agg := func(k, v string) map[string]any {
		return map[string]any{"aggregations": []any{map[string]any{"name": "a", "signal": "spans", k: v}}}
	}
	for _, c := range []struct {
		raw      map[string]any
		key, bad string
	}{
		{map[string]any{"error_mode": "loud"}, "error_mode", "loud"},
		{map[string]any{"temporality": "gauge"}, "temporality", "gauge"},
		{map[string]any{"late_firings": "drop"}, "late_firings", "drop"},
		{map[string]any{"late_data": map[string]any{"action": "keep"}}, "late_data.action", "keep"},
		{map[string]any{"aggregations": []any{map[string]any{"name": "a", "signal": "profiles"}}}, "aggregations[0].signal", "profiles"},
		{agg("weight", "tracestate"), "aggregations[0].weight", "tracestate"},
		{agg("weight", "attribute:"), "aggregations[0].weight", "attribute:"},
		{agg("unit", "minutes"), "aggregations[0].unit", "minutes"},
	} {
		err := confmap.NewFromStringMap(c.raw).Unmarshal(createDefaultConfig().(*Config))
		if err == nil || !strings.Contains(err.Error(), "'"+c.key+"'") || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("%s: %q: error %v, want one naming the key and the value", c.key, c.bad, err)
		}
	}
	cfg := createDefaultConfig().(*Config)
	cfg.Window.Size = time.Minute
	cfg.Temporality, cfg.LateFirings, cfg.LateData.Action = "gauge", "drop", "keep"
	cfg.Aggregations = []AggregationConfig{{Name: "a", Signal: "profiles", Weight: "tracestate", Unit: "minutes"}}
	err := cfg.Validate()
	for _, key := range []string{"temporality", "late_firings", "late_data.action", ".signal", ".weight", ".unit"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate of values built in code: %v, want an error naming %s", err, key)
		}
	}
	if createDefaultConfig().(*Config).ErrorMode != "ignore" {
		t.Fatal("error_mode's default is not ignore")
	}
}
