package main

import (
	"context"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the collector's exporters compress with gzip by default
)

// server is the OTLP/gRPC server in front of a printer: metrics are the window results, traces and
// logs the late records the connector routes. It locks the printer for each request and each tick.
type server struct {
	mu  sync.Mutex
	p   *printer
	now func() time.Time
	srv *grpc.Server
}

func newServer(p *printer, now func() time.Time) *server {
	s := &server{p: p, now: now, srv: grpc.NewServer()}
	pmetricotlp.RegisterGRPCServer(s.srv, &metricsService{s: s})
	ptraceotlp.RegisterGRPCServer(s.srv, &tracesService{s: s})
	plogotlp.RegisterGRPCServer(s.srv, &logsService{s: s})
	return s
}

// serve serves on lis until stop.
func (s *server) serve(lis net.Listener) error { return s.srv.Serve(lis) }

// tick lets the printer print what is due.
func (s *server) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p.tick(s.now())
}

// stop ends the server, letting the requests in progress finish for up to grace, and prints what is
// still waiting.
func (s *server) stop(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		s.srv.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.p.flush(s.now())
}

type metricsService struct {
	pmetricotlp.UnimplementedGRPCServer
	s *server
}

func (m *metricsService) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.p.metrics(req.Metrics(), m.s.now())
	return pmetricotlp.NewExportResponse(), nil
}

type tracesService struct {
	ptraceotlp.UnimplementedGRPCServer
	s *server
}

func (t *tracesService) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.p.traces(req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

type logsService struct {
	plogotlp.UnimplementedGRPCServer
	s *server
}

func (l *logsService) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.p.logs(req.Logs())
	return plogotlp.NewExportResponse(), nil
}
