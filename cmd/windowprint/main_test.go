package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
)

// syncBuffer is a bytes.Buffer that realMain's goroutines and the test may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestBadFlagsAndAnAddressInUse(t *testing.T) {
	var stderr syncBuffer
	if rc := realMain([]string{"-nope"}, &bytes.Buffer{}, &stderr, nil); rc != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", rc)
	}
	if rc := realMain([]string{"extra"}, &bytes.Buffer{}, &stderr, nil); rc != 2 {
		t.Errorf("an argument: exit %d, want 2", rc)
	}
	if rc := realMain([]string{"-listen", "256.0.0.1:1"}, &bytes.Buffer{}, &stderr, nil); rc != 1 {
		t.Errorf("an address it cannot listen on: exit %d, want 1", rc)
	}
}

// The server takes gzip-compressed OTLP, as the collector's exporters send it, and on a stop prints
// the window waiting and the late records.
func TestServesOTLPAndPrintsWhatWaitsOnStop(t *testing.T) {
	var stdout, stderr syncBuffer
	stop := make(chan os.Signal, 1)
	exited := make(chan int, 1)
	go func() { exited <- realMain([]string{"-listen", "127.0.0.1:0"}, &stdout, &stderr, stop) }()

	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:[0-9]+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == ""; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("windowprint did not say where it listens: %q", stderr.String())
		}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gz := grpc.UseCompressor(gzip.Name)

	// A window's first firing, whose lines have not settled when the stop comes.
	start := time.Date(2099, 1, 2, 3, 4, 0, 0, time.UTC)
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("log.volume.count")
	m.SetUnit("{log}")
	dp := m.SetEmptySum().DataPoints().AppendEmpty()
	dp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	dp.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(10 * time.Second)))
	dp.SetIntValue(42)
	if _, err := pmetricotlp.NewGRPCClient(conn).Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md), gz); err != nil {
		t.Fatal(err)
	}
	if _, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(routedSpans("expired", at(-100))), gz); err != nil {
		t.Fatal(err)
	}
	if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(routedLog("expired", at(-90), at(-80))), gz); err != nil {
		t.Fatal(err)
	}

	stop <- syscall.SIGTERM
	select {
	case rc := <-exited:
		if rc != 0 {
			t.Fatalf("exit %d after a stop; stderr: %s", rc, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("windowprint did not exit within 10 s of a stop")
	}
	want := "window 2099-01-02 03:04:00 to 03:04:10 UTC\n" +
		"  log.volume  (all) count=42\n" +
		"late: none within allowed_lateness; 1 span, 1 log past it, routed, event time 09:58:20-09:58:30 UTC\n"
	if got := stdout.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
