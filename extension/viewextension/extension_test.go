package viewextension

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator"
	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
	"github.com/windowaggregator/windowaggregator/internal/view"
)

// startView starts the extension on a free loopback port and returns its base URL.
func startView(t *testing.T) string {
	t.Helper()
	return "http://" + startViewExtension(t).addr
}

// startViewExtension starts the extension through its factory on a free loopback port, and shuts it
// down at the test's end.
func startViewExtension(t *testing.T) *viewExtension {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ext.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return ext.(*viewExtension)
}

// startConnector starts a traces -> metrics window_aggregator through its factory, its clock a fake
// one at the Unix second at, its default config changed by configure, and shuts it down at the
// test's end; it returns the connector and the context to feed it with.
func startConnector(t *testing.T, at int64, configure func(*windowaggregator.Config)) (connector.Traces, context.Context) {
	t.Helper()
	ctx := clock.NewContext(context.Background(), clock.NewFake(time.Unix(at, 0)))
	f := windowaggregator.NewConnectorFactory()
	cfg := f.CreateDefaultConfig().(*windowaggregator.Config)
	configure(cfg)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := f.CreateTracesToMetrics(ctx, connectortest.NewNopSettings(f.Type()), cfg, new(consumertest.MetricsSink))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c, ctx
}

func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// spans is one request from source src: a server span of service a ending at each of ends (s).
func spans(src string, ends ...float64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "a")
	rs.Resource().Attributes().PutStr("service.instance.id", src)
	ss := rs.ScopeSpans().AppendEmpty()
	for i, end := range ends {
		sp := ss.Spans().AppendEmpty()
		sp.SetName("/x")
		sp.SetTraceID(pcommon.TraceID([16]byte{1, byte(len(src)), byte(i), byte(end)}))
		sp.SetSpanID(pcommon.SpanID([8]byte{2, byte(len(src)), byte(i), byte(end)}))
		e := int64(end * 1e9)
		sp.SetEndTimestamp(pcommon.Timestamp(e))
		sp.SetStartTimestamp(pcommon.Timestamp(e - 1e6))
	}
	return td
}

// A running connector fed known spans, through its factory, as the view reads it: worked out by
// hand. 10 s tumbling windows, 5 s allowed lateness, no out-of-orderness, per_source by
// service.instance.id, the clock at 1030 s. The first batch, source "ab" at 1001 and 1022, is judged
// against no W: both on time; W = 1022, lag 8 s. Source "c" at 1012: [1010,1020) has fired (1020 <=
// 1022) and is kept until W 1025: a late update; c, the least of the sources (1012), holds W where it
// is. Then c at 1003: [1000,1010) expired at W 1015, dropped (no late pipeline). The aggregation:
// 2 on time, 1 late update, 1 late dropped; open windows [1010,1020) (fired) and [1020,1030) (fires at W 1030, expires at 1035).
func TestComponentsAsJSON(t *testing.T) {
	base := startView(t)
	code, body := get(t, http.MethodGet, base+"/api/v1/components")
	if code != http.StatusOK || strings.TrimSpace(body) != "[]" {
		t.Fatalf("with no component running: %d %q, want 200 []", code, body)
	}

	var cfg *windowaggregator.Config
	c, ctx := startConnector(t, 1030, func(c *windowaggregator.Config) {
		cfg = c
		cfg.Window.Size = 10 * time.Second
		cfg.AllowedLateness = 5 * time.Second
		cfg.Watermark.MaxOutOfOrderness = 0
		cfg.Watermark.PerSource = []string{"service.instance.id"}
		cfg.Aggregations = []windowaggregator.AggregationConfig{{Name: "lat", Signal: "spans",
			GroupBy: []windowaggregator.GroupByKey{{Key: "service.name"}}, Outputs: []string{"count"}}}
	})
	for _, td := range []ptrace.Traces{spans("ab", 1001, 1022), spans("c", 1012)} {
		if err := c.ConsumeTraces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ConsumeTraces(ctx, spans("c", 1003)); err != nil {
		t.Fatal(err)
	}

	code, body = get(t, http.MethodGet, base+"/api/v1/components")
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, body)
	}
	var got []view.ComponentView
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(got) != 1 {
		t.Fatalf("%d components, want 1: %s", len(got), body)
	}
	v := got[0]
	at := func(s float64) time.Time { return time.Unix(0, int64(s*1e9)).UTC() }
	if v.Watermark == nil || !v.Watermark.Equal(at(1022)) || v.WatermarkLagSeconds == nil || *v.WatermarkLagSeconds != 8 || v.HeldBy != "source" {
		t.Errorf("watermark %v, held by %q; want 1022 s, lag 8 s, source: %s", v.Watermark, v.HeldBy, body)
	}
	if len(v.Sources) != 2 || v.SourcesTotal != 2 || !v.Sources[0].HoldsBack || v.Sources[0].Source["service.instance.id"] != "c" ||
		!v.Sources[0].Watermark.Equal(at(1012)) || v.Sources[1].HoldsBack || v.Sources[1].Source["service.instance.id"] != "ab" ||
		!v.Sources[1].Watermark.Equal(at(1022)) {
		t.Errorf("sources %+v, want c (1012) holding W back, then ab (1022)", v.Sources)
	}
	if len(v.Aggregations) != 1 {
		t.Fatalf("aggregations %+v", v.Aggregations)
	}
	a := v.Aggregations[0]
	if a.Name != "lat" || a.Signal != "spans" || a.Series != 1 || a.MaxSeries != cfg.MaxSeries ||
		a.Records != (view.RecordCounts{OnTime: 2, LateAccepted: 1, LateDropped: 1}) {
		t.Errorf("aggregation %+v", a)
	}
	// The last window W has closed is [1010,1020): service a's one record there, c's late update.
	if len(a.TopSeries) != 1 || a.TopSeries[0].Series["service.name"] != "a" || a.TopSeries[0].Records != 1 ||
		a.LastWindowEnd == nil || !a.LastWindowEnd.Equal(at(1020)) || !a.LastWindowFired {
		t.Errorf("top series %+v of the window ending %v, want service.name a with 1 record, 1020 s", a.TopSeries, a.LastWindowEnd)
	}
	// The component's windows; [1020,1030) is not overdue at 1030 s: W has until 1030 + 0 of
	// max_out_of_orderness + 10 s of slide.
	if a.OpenWindows != 2 || v.OpenWindows != 2 || len(v.Windows) != 2 || !v.Windows[0].End.Equal(at(1020)) || !v.Windows[0].Fired ||
		!v.Windows[1].FiresAtW.Equal(at(1030)) || v.Windows[1].Fired || !v.Windows[1].ExpiresAtW.Equal(at(1035)) ||
		v.Windows[1].OverdueSeconds != nil || v.OverdueWindows != 0 {
		t.Errorf("windows %d %+v", a.OpenWindows, v.Windows)
	}
	// Health: c holds W back, 10 s behind ab; nothing late routed (the one late record was dropped:
	// by rate, over the readings, whose timing the test does not set).
	if h := v.Health; h == nil || h.Holder["service.instance.id"] != "c" || h.HolderBehindSeconds == nil || *h.HolderBehindSeconds != 10 ||
		h.TiedSources != 0 || h.LateRoutedPerSecond != 0 {
		t.Errorf("health %+v", h)
	}

	// The page, as served, holds the same figures: the health strip, c's row marked as holding W
	// back, the aggregation, the component's two windows once.
	code, body = get(t, http.MethodGet, base+"/")
	holds := regexp.MustCompile(`<tr class="holds[^"]*"><td>service.instance.id=c</td>`)
	health := regexp.MustCompile(`lag 8.0 s ·\s+held by service.instance.id=c, 10.0 s behind the next source ·\s+<span[^>]*>late routed [0-9.]+/s, dropped [0-9.]+/s</span> ·\s+no window overdue ·\s+emission ok`)
	if code != http.StatusOK || !holds.MatchString(body) || !health.MatchString(body) || !strings.Contains(body, "lat (spans)") ||
		strings.Count(body, "<td>fired</td>") != 1 || strings.Count(body, "<td>open</td>") != 1 || strings.Count(body, `<table class="windows">`) != 1 {
		t.Errorf("GET /: %d\n%s", code, body)
	}

	// The explainer: service a's windows, [1010,1020) (c's late update, 1 record) and [1020,1030)
	// (ab's 1022, 1 record); a service nobody sent is not seen.
	code, body = get(t, http.MethodGet, base+"/api/v1/series?component="+url.QueryEscape(v.ID)+"&aggregation=lat&key.service.name=a")
	var ex view.SeriesExplanation
	if err := json.Unmarshal([]byte(body), &ex); code != http.StatusOK || err != nil || !ex.Found || len(ex.Windows) != 2 ||
		!ex.Windows[0].End.Equal(at(1020)) || ex.Windows[0].Records != 1 || !ex.Windows[1].End.Equal(at(1030)) || ex.Windows[1].Records != 1 {
		t.Errorf("explain service a: %d %v %s", code, err, body)
	}
	code, body = get(t, http.MethodGet, base+"/api/v1/series?component="+url.QueryEscape(v.ID)+"&aggregation=lat&key.service.name=zz")
	ex = view.SeriesExplanation{}
	if err := json.Unmarshal([]byte(body), &ex); code != http.StatusOK || err != nil || ex.Found || !strings.HasPrefix(ex.Why, "not seen") ||
		ex.Records == nil || ex.Records.OnTime != 2 {
		t.Errorf("explain service zz: %d %v %s", code, err, body)
	}
	id := url.QueryEscape(v.ID)
	for _, q := range []struct{ query, says string }{
		{"", "name the series"},
		{"?component=" + id, "name the series"},
		{"?component=" + id + "&aggregation=lat&key.service.name=" + strings.Repeat("x", maxValueBytes+1), "more than a series key's"},
		{"?component=nope&aggregation=lat", "no window_aggregator component"},
		{"?component=" + id + "&aggregation=nope", "has no aggregation"},
		{"?component=" + id + "&aggregation=lat&key.route=x", "does not group by"},
		{"?component=" + id + "&aggregation=lat&other=1", "unknown query parameter"},
		{"?component=" + id + "&component=x&aggregation=lat", "given 2 times"},
	} {
		if code, body := get(t, http.MethodGet, base+"/api/v1/series"+q.query); code != http.StatusBadRequest || !strings.Contains(body, q.says) {
			t.Errorf("series%s: %d %q, want 400 saying %q", q.query, code, body, q.says)
		}
	}

	// Bounded: ?top=1 lists one source and one window, with the totals.
	_, body = get(t, http.MethodGet, base+"/api/v1/components?top=1")
	got = nil
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got[0].Sources) != 1 || got[0].SourcesTotal != 2 ||
		len(got[0].Windows) != 1 || got[0].OpenWindows != 2 {
		t.Errorf("top=1: %v %s", err, body)
	}
	for _, c := range []struct {
		method, query string
		code          int
		says          string
	}{
		{http.MethodPost, "", http.StatusMethodNotAllowed, "read only"},
		{http.MethodDelete, "", http.StatusMethodNotAllowed, "read only"},
		{http.MethodGet, "?top=0", http.StatusBadRequest, "top must be"},
		{http.MethodGet, "?top=1001", http.StatusBadRequest, "top must be"},
		{http.MethodGet, "?top=x", http.StatusBadRequest, "top must be"},
		{http.MethodGet, "?series=a", http.StatusBadRequest, "unknown query parameter"},
		{http.MethodGet, "?top=5&top=6", http.StatusBadRequest, "given 2 times"},
	} {
		code, body := get(t, c.method, base+"/api/v1/components"+c.query)
		if code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s %s: %d %q, want %d saying %q", c.method, c.query, code, body, c.code, c.says)
		}
	}
}

// A second view on an endpoint the first holds fails to start, naming the address, as the
// collector's start then does; the first keeps serving.
func TestEndpointTaken(t *testing.T) {
	base := startView(t)
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = strings.TrimPrefix(base, "http://")
	ext, err := NewFactory().Create(context.Background(), extensiontest.NewNopSettings(Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = ext.Start(context.Background(), componenttest.NewNopHost())
	if err == nil || !strings.Contains(err.Error(), cfg.NetAddr.Endpoint) {
		t.Errorf("start on a taken endpoint: %v, want an error naming %s", err, cfg.NetAddr.Endpoint)
	}
	if err := ext.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown after a failed start: %v", err)
	}
	if code, _ := get(t, http.MethodGet, base+"/api/v1/components"); code != http.StatusOK {
		t.Errorf("the first view: %d", code)
	}
}

// Bounded whatever the number of series: 5,000 series from 100 sources in 30 windows, and the
// response lists at most 20 sources, windows and top series (the default top), with the totals
// stated, in about the bytes of those lists; the page likewise.
func TestResponsesAreBounded(t *testing.T) {
	base := startView(t)
	c, ctx := startConnector(t, 2000, func(cfg *windowaggregator.Config) {
		cfg.Window.Size = time.Second
		cfg.AllowedLateness = time.Hour // every window kept
		cfg.Watermark.PerSource = []string{"service.instance.id"}
		cfg.Aggregations = []windowaggregator.AggregationConfig{{Name: "lat", Signal: "spans",
			GroupBy: []windowaggregator.GroupByKey{{Key: "service.name"}, {Key: "route"}}, Outputs: []string{"count"}}}
	})
	td := ptrace.NewTraces()
	for src := range 100 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("instance-%03d", src))
		rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("service-%03d", src))
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range 50 {
			sp := ss.Spans().AppendEmpty()
			sp.Attributes().PutStr("route", fmt.Sprintf("/route/%02d", i))
			sp.SetTraceID(pcommon.TraceID([16]byte{1, byte(src), byte(i)}))
			sp.SetSpanID(pcommon.SpanID([8]byte{2, byte(src), byte(i)}))
			end := int64(1900+i%30) * 1e9
			sp.SetEndTimestamp(pcommon.Timestamp(end))
			sp.SetStartTimestamp(pcommon.Timestamp(end - 1e6))
		}
	}
	if err := c.ConsumeTraces(ctx, td); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, http.MethodGet, base+"/api/v1/components")
	var got []view.ComponentView
	if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil || len(got) != 1 || len(got[0].Aggregations) != 1 {
		t.Fatalf("GET: %d %v", code, err)
	}
	v, a := got[0], got[0].Aggregations[0]
	if v.SourcesTotal != 100 || len(v.Sources) != defaultTop || a.Series != 5000 || a.OpenWindows != 30 || v.OpenWindows != 30 || len(v.Windows) != defaultTop ||
		len(a.TopSeries) != defaultTop {
		t.Errorf("sources %d of %d, series %d, windows %d of %d, top series %d; want %d of 100, 5000, %d of 30, %d",
			len(v.Sources), v.SourcesTotal, a.Series, len(v.Windows), v.OpenWindows, len(a.TopSeries), defaultTop, defaultTop, defaultTop)
	}
	// 20 sources, 20 windows and 20 series of about 160, 170 and 80 bytes each, and the rest.
	if len(body) > 12<<10 {
		t.Errorf("the response is %d bytes for 5,000 series, want it bounded by its lists, under 12 KiB", len(body))
	}
	if code, page := get(t, http.MethodGet, base+"/"); code != http.StatusOK || len(page) > 48<<10 {
		t.Errorf("the page: %d, %d bytes, want under 48 KiB", code, len(page))
	}
}

// On a loopback address the view answers requests for localhost only: a request naming another
// host (a page elsewhere whose domain was pointed at 127.0.0.1) gets 403. A second Shutdown does
// nothing.
func TestLocalhostOnly(t *testing.T) {
	ext := startViewExtension(t)
	addr := ext.addr
	_, port, _ := net.SplitHostPort(addr)
	for _, c := range []struct {
		host string
		code int
	}{
		{addr, http.StatusOK}, {"localhost:" + port, http.StatusOK}, {"LOCALHOST", http.StatusOK}, {"[::1]:" + port, http.StatusOK},
		{"evil.example:" + port, http.StatusForbidden}, {"evil.example", http.StatusForbidden}, {"10.0.0.1:" + port, http.StatusForbidden},
	} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/components", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = c.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("Host %s: %d, want %d", c.host, resp.StatusCode, c.code)
		}
	}
	for i := range 2 {
		if err := ext.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown %d: %v", i+1, err)
		}
	}
}
