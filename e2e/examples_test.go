package e2e

import (
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
			bin := distBinary
			if strings.HasSuffix(f, "-gateway.yaml") { // the gateway tier's distribution
				bin = gatewayBinary
			}
			out, err := validateWith(bin, f)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// An invalid component config stops the distribution at startup with the key and the reason.
func TestInvalidConfigFailsAtStartupNamingTheKey(t *testing.T) {
	skipShort(t)
	path := writeConfig(t, "bad.yaml", debugConfig(0, "{size: 10s, slide: 3s}", "[{name: a, signal: logs, outputs: [p99]}]", "logs"))
	out, err := validate(path)
	if err == nil {
		t.Fatal("an invalid config validated")
	}
	checkOutputContains(t, "output", out, "window.slide", "whole multiple", `aggregations[0] (a).outputs: "p99" needs a value`)
}
