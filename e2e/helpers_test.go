package e2e

// Pieces that several end-to-end tests share: config fragments, starting the distribution on a
// receiver port, validating a config with it, and event times in the past.

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// otlpExporter is an entry of the exporters section: an OTLP/gRPC exporter named name that sends to
// the test's server at endpoint, with no queue and no retries.
func otlpExporter(name, endpoint string) string {
	return fmt.Sprintf(`
  %s:
    endpoint: %s
    tls: {insecure: true}
    sending_queue: {enabled: false}
    retry_on_failure: {enabled: false}`, name, endpoint)
}

// otlpReceiver is the receivers section with one OTLP/gRPC receiver, named otlp, on the loopback port.
func otlpReceiver(port int) string {
	return fmt.Sprintf(`
receivers:
  otlp:
    protocols: {grpc: {endpoint: 127.0.0.1:%d}}`, port)
}

// fileStorageExtension is the extensions section with the file_storage/wa extension keeping its
// files in dir.
func fileStorageExtension(dir string) string {
	return fmt.Sprintf(`
extensions:
  file_storage/wa:
    directory: %s`, dir)
}

// debugConfig is a config with window_aggregator as a connector between an OTLP receiver on port, in
// the pipeline of signal (traces or logs), and a debug exporter; window and aggregations are the
// connector's settings as YAML flow values.
func debugConfig(port int, window, aggregations, signal string) string {
	return fmt.Sprintf(`
receivers: {otlp: {protocols: {grpc: {endpoint: 127.0.0.1:%d}}}}
connectors:
  window_aggregator:
    window: %s
    aggregations: %s
exporters: {debug: {}}
service:
  telemetry: {metrics: {level: none}}
  pipelines:
    %s: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [debug]}
`, port, window, aggregations, signal)
}

// writeConfig writes config to a file named name in a fresh temporary directory and returns its path.
func writeConfig(t *testing.T, name, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, config)
	return path
}

// validate runs the distribution's validate command on the config file at path.
func validate(path string) ([]byte, error) {
	return validateWith(distBinary, path)
}

// validateWith runs the validate command of the collector binary bin on the config file at path.
func validateWith(bin, path string) ([]byte, error) {
	return exec.Command(bin, "validate", "--config", path).CombinedOutput()
}

// checkOutputContains fails the test for each of wants that out (named what in the message) lacks.
func checkOutputContains(t *testing.T, what string, out []byte, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

// runCollector starts the distribution on config, whose OTLP receiver listens on the loopback port
// recv, and dials that receiver.
func runCollector(t *testing.T, recv int, config string) (*collector, *client) {
	t.Helper()
	addr := loopback(recv)
	col := startCollector(t, config, addr)
	return col, dial(t, addr)
}

// loopback is the address of port on 127.0.0.1.
func loopback(port int) string {
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// pastBase returns base, a 10 s window boundary five minutes in the past, in Unix nanoseconds, and
// at, which turns seconds after base into Unix nanoseconds.
func pastBase() (base int64, at func(s float64) int64) {
	base = (time.Now().UnixNano()/(10*sec))*(10*sec) - 300*sec
	return base, func(s float64) int64 { return base + int64(s*float64(sec)) }
}

// waitUntilUp polls up every 50 ms until it reports true, failing t if the process behind done exits
// first (the exit is put back on done for whoever waits on it later) or 30 s pass; output is the
// process's output, shown on failure.
func waitUntilUp(t *testing.T, what string, done chan error, output *syncBuffer, up func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !up() {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("%s: the process exited at start: %v\n%s", what, err, output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come up within 30 s\n%s", what, output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// windowByWindow is the connector settings of the tests that read results window by window: delta
// points, late firings that revise, so that each point is one firing of its window.
const windowByWindow = `
    temporality: delta
    late_firings: revise`
