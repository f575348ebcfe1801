// Package e2e tests the built otelcol-windowaggregator distribution as a process: it builds the
// distribution from the project's builder-config.yaml, starts it on loopback ports with a YAML config,
// sends spans, logs and metrics over OTLP/gRPC, and receives the metrics and the late data through the
// distribution's OTLP exporter into a server inside the test.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the exporters compress with gzip by default
)

// distBinary and gatewayBinary are built once by TestMain.
var distBinary, gatewayBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		root, err := filepath.Abs("..")
		if err != nil {
			panic(err)
		}
		distBinary = filepath.Join(root, "_build", "otelcol-windowaggregator", "otelcol-windowaggregator")
		gatewayBinary = filepath.Join(root, "_build", "otelcol-windowaggregator-gateway", "otelcol-windowaggregator-gateway")
		for _, d := range []struct{ builder, config string }{
			{"v0.165.0", "builder-config.yaml"},
			{"v0.161.0", "builder-config-gateway.yaml"}, // the load-balancing exporter's one release
		} {
			if err := buildDistribution(root, d.builder, d.config); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
	}
	os.Exit(m.Run())
}

// buildDistribution runs the collector builder of version on the builder config, through the Go
// toolchain (whose build cache makes a rebuild of unchanged sources quick).
func buildDistribution(root, version, config string) error {
	if err := os.MkdirAll(filepath.Join(root, "_build"), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "run", "go.opentelemetry.io/collector/cmd/builder@"+version, "--config", config)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building the distribution of %s: %v\n%s", config, err, out)
	}
	return nil
}

// otlpServer receives what the distribution's exporters send.
type otlpServer struct {
	addr string
	srv  *grpc.Server

	mu      sync.Mutex
	traces  []ptraceotlp.ExportRequest
	logs    []plogotlp.ExportRequest
	metrics []pmetricotlp.ExportRequest
}

func startServer(t *testing.T) *otlpServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &otlpServer{addr: lis.Addr().String(), srv: grpc.NewServer()}
	ptraceotlp.RegisterGRPCServer(s.srv, &tracesServer{otlpServer: s})
	plogotlp.RegisterGRPCServer(s.srv, &logsServer{otlpServer: s})
	pmetricotlp.RegisterGRPCServer(s.srv, &metricsServer{otlpServer: s})
	go func() { _ = s.srv.Serve(lis) }()
	t.Cleanup(s.srv.Stop)
	return s
}

// record appends req to one of the server's lists of requests, under the server's lock.
func record[Req any](s *otlpServer, list *[]Req, req Req) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*list = append(*list, req)
}

// tracesServer, logsServer and metricsServer are the server's three OTLP services.
type tracesServer struct {
	ptraceotlp.UnimplementedGRPCServer
	*otlpServer
}

func (s *tracesServer) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	record(s.otlpServer, &s.traces, req)
	return ptraceotlp.NewExportResponse(), nil
}

type logsServer struct {
	plogotlp.UnimplementedGRPCServer
	*otlpServer
}

func (s *logsServer) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	record(s.otlpServer, &s.logs, req)
	return plogotlp.NewExportResponse(), nil
}

type metricsServer struct {
	pmetricotlp.UnimplementedGRPCServer
	*otlpServer
}

func (s *metricsServer) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	record(s.otlpServer, &s.metrics, req)
	return pmetricotlp.NewExportResponse(), nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port
}

// collector is the distribution running as a process.
type collector struct {
	cmd    *exec.Cmd
	output *syncBuffer
	done   chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// startCollector writes config to a file and runs the distribution on it until the receiver at
// receiverAddr accepts connections.
func startCollector(t *testing.T, config, receiverAddr string) *collector {
	t.Helper()
	return startBinary(t, distBinary, config, receiverAddr)
}

// startBinary is startCollector for the collector binary bin.
func startBinary(t *testing.T, bin, config, receiverAddr string) *collector {
	t.Helper()
	path := writeConfig(t, "config.yaml", config)
	c := &collector{cmd: exec.Command(bin, "--config", path), output: &syncBuffer{}, done: make(chan error, 1)}
	c.cmd.Stdout, c.cmd.Stderr = c.output, c.output
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("collector output:\n%s", c.output.String())
		}
	})
	waitUntilUp(t, "the collector's receiver", c.done, c.output, func() bool {
		conn, err := net.DialTimeout("tcp", receiverAddr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return c
}

// stop sends SIGTERM and waits for a clean exit.
func (c *collector) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("the collector exited with %v\n%s", err, c.output.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the collector did not stop within 30 s of SIGTERM")
	}
}

// client sends OTLP over gRPC.
type client struct {
	traces  ptraceotlp.GRPCClient
	logs    plogotlp.GRPCClient
	metrics pmetricotlp.GRPCClient
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &client{traces: ptraceotlp.NewGRPCClient(conn), logs: plogotlp.NewGRPCClient(conn), metrics: pmetricotlp.NewGRPCClient(conn)}
}

// eventually polls cond until it holds or 15 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the distribution")
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A window of 1m sliding by 1ms puts each record in 60000 windows: the distribution refuses it at
// startup, naming window.slide. 10000 windows per record is the limit, and is accepted.
func TestGeometryLimitFailsAtStartupNamingWindowSlide(t *testing.T) {
	skipShort(t)
	config := func(size, slide string) string {
		window := fmt.Sprintf("{size: %s, slide: %s}", size, slide)
		return writeConfig(t, "geometry.yaml", debugConfig(freePort(t), window, "[{name: a, signal: spans, outputs: [count]}]", "traces"))
	}
	bad := config("1m", "1ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, distBinary, "--config", bad).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the distribution kept running on window.size 1m, window.slide 1ms:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the distribution exited cleanly on window.size 1m, window.slide 1ms:\n%s", out)
	}
	checkOutputContains(t, "startup error", out, "window.slide", "10000")
	if out, err := validate(config("10s", "1ms")); err != nil {
		t.Errorf("window.size 10s, window.slide 1ms (10000 windows per record) is within the limit: %v\n%s", err, out)
	}
}

// A window size or slide below 1 ms is refused by the distribution's validate command, naming the
// key and the likely cause (a number without a unit is read as nanoseconds); so is a configuration
// whose series would hold more than 1,000,000 panes: 10s sliding by 1ms with 20m of
// allowed_lateness holds (10 s + 20 m) / 1 ms + 1 = 1,210,001. With 5m, 310,001: accepted.
func TestTinyWindowsFailValidateNamingTheKey(t *testing.T) {
	skipShort(t)
	config := func(window, lateness string) string {
		c := debugConfig(freePort(t), window, "[{name: a, signal: spans, outputs: [count]}]", "traces")
		c = strings.Replace(c, "    window: "+window, "    window: "+window+"\n    allowed_lateness: "+lateness, 1)
		if !strings.Contains(c, "allowed_lateness: "+lateness) {
			t.Fatalf("the config has no window line to add allowed_lateness after:\n%s", c)
		}
		return writeConfig(t, "tiny.yaml", c)
	}
	for _, c := range []struct {
		window, lateness string
		says             []string
	}{
		{"{size: 10}", "0s", []string{"window.size: must be at least 1ms", "without a unit"}},
		{"{size: 10s, slide: 500}", "0s", []string{"window.slide: must be at least 1ms", "without a unit"}},
		{"{size: 10s, slide: 1ms}", "20m", []string{"1210001 panes, more than 1000000"}},
	} {
		out, err := validate(config(c.window, c.lateness))
		if err == nil {
			t.Errorf("window %s, allowed_lateness %s validated:\n%s", c.window, c.lateness, out)
			continue
		}
		checkOutputContains(t, "validate "+c.window, out, c.says...)
	}
	if out, err := validate(config("{size: 10s, slide: 1ms}", "5m")); err != nil {
		t.Errorf("window 10s sliding by 1ms with 5m of allowed_lateness (310001 panes): %v\n%s", err, out)
	}
}
