package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every example config is one the distribution accepts.
func TestExampleConfigsValidate(t *testing.T) {
	skipShort(t)
	files, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := exec.Command(distBinary, "validate", "--config", f).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// An invalid component config stops the distribution at startup with the key and the reason.
func TestInvalidConfigFailsAtStartupNamingTheKey(t *testing.T) {
	skipShort(t)
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, path, `
receivers: {otlp: {protocols: {grpc: {endpoint: 127.0.0.1:0}}}}
connectors:
  window_aggregator:
    window: {size: 10s, slide: 3s}
    aggregations: [{name: a, signal: logs, outputs: [p99]}]
exporters: {debug: {}}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    logs: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [debug]}
`)
	out, err := exec.Command(distBinary, "validate", "--config", path).CombinedOutput()
	if err == nil {
		t.Fatal("an invalid config validated")
	}
	for _, want := range []string{"window.slide", "whole multiple", `aggregations[0] (a).outputs: "p99" needs a value`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
