package windowaggregator

import (
	"os"
	"regexp"
	"sort"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// The telemetry that the code registers, metadata.yaml (both forms) and the README list the same metrics.
func TestTelemetryIsListedInMetadataAndReadme(t *testing.T) {
	src, err := os.ReadFile("telemetry.go")
	must(t, err)
	inCode := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(otelcol_window_aggregator_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		inCode[m[1]] = true
	}
	readme, err := os.ReadFile("README.md")
	must(t, err)
	for _, path := range []string{"metadata.yaml", "connector/metadata.yaml"} {
		raw, err := os.ReadFile(path)
		must(t, err)
		var md struct {
			Type           string `yaml:"type"`
			DeprecatedType string `yaml:"deprecated_type"`
			Telemetry      struct {
				Metrics map[string]any `yaml:"metrics"`
			} `yaml:"telemetry"`
		}
		must(t, yaml.Unmarshal(raw, &md))
		if md.Type != Type.String() || md.DeprecatedType != aliasType.String() {
			t.Errorf("%s: type %q alias %q", path, md.Type, md.DeprecatedType)
		}
		inMeta := map[string]bool{}
		for k := range md.Telemetry.Metrics {
			inMeta["otelcol_"+k] = true
		}
		if a, b := keys(inCode), keys(inMeta); !equal(a, b) {
			t.Errorf("%s lists %v, the code registers %v", path, b, a)
		}
	}
	for name := range inCode {
		if !regexp.MustCompile("`" + name + "`").Match(readme) {
			t.Errorf("README does not list %s", name)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
