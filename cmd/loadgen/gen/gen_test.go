package gen

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var testNow = time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

func testConfig() Config {
	return Config{
		Services:   3,
		Series:     4,
		OutOfOrder: 2 * time.Second,
		Late:       0.10,
		LateBy:     20 * time.Second,
		TooLate:    0.05,
		TooLateBy:  5 * time.Minute,
		Future:     0.02,
		FutureBy:   time.Hour,
		Invalid:    0.03,
	}
}

func newGen(t *testing.T, cfg Config, seed uint64) *Generator {
	t.Helper()
	g, err := New(cfg, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

// kindOf reads the kind attribute. The per-record helpers return errors rather than take a
// *testing.T, since t.Helper per record is slow under -race.
func kindOf(attrs pcommon.Map) (Kind, error) {
	v, ok := attrs.Get(AttrKind)
	if !ok {
		return 0, fmt.Errorf("record without %s", AttrKind)
	}
	for k := OnTime; k < NumKinds; k++ {
		if k.String() == v.Str() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown kind %q", v.Str())
}

type spanRec struct {
	service string
	span    ptrace.Span
}

func allSpans(td ptrace.Traces) []spanRec {
	var out []spanRec
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		svc, _ := rs.Resource().Attributes().Get(AttrServiceName)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			spans := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				out = append(out, spanRec{svc.Str(), spans.At(k)})
			}
		}
	}
	return out
}

type logRec struct {
	service string
	rec     plog.LogRecord
}

func allLogs(ld plog.Logs) []logRec {
	var out []logRec
	for i := 0; i < ld.ResourceLogs().Len(); i++ {
		rl := ld.ResourceLogs().At(i)
		svc, _ := rl.Resource().Attributes().Get(AttrServiceName)
		for j := 0; j < rl.ScopeLogs().Len(); j++ {
			lrs := rl.ScopeLogs().At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				out = append(out, logRec{svc.Str(), lrs.At(k)})
			}
		}
	}
	return out
}

// checkEventTime reports whether ts fits the window its kind promises relative to testNow.
func checkEventTime(cfg Config, k Kind, ts time.Time) error {
	return checkEventTimeAt(cfg, testNow, k, ts)
}

// checkEventTimeAt is checkEventTime relative to the batch's now.
func checkEventTimeAt(cfg Config, now time.Time, k Kind, ts time.Time) error {
	in := func(lo, hi time.Time) error {
		if ts.Before(lo) || ts.After(hi) {
			return fmt.Errorf("%v record at %v, want within [%v, %v]", k, ts, lo, hi)
		}
		return nil
	}
	switch k {
	case OnTime:
		return in(now.Add(-cfg.OutOfOrder), now)
	case Late:
		return in(now.Add(-cfg.LateBy-cfg.OutOfOrder), now.Add(-cfg.LateBy))
	case TooLate:
		return in(now.Add(-cfg.TooLateBy-cfg.OutOfOrder), now.Add(-cfg.TooLateBy))
	case Future:
		if !ts.After(now) {
			return fmt.Errorf("future record at %v, not after now %v", ts, now)
		}
		return in(now.Add(cfg.FutureBy), now.Add(cfg.FutureBy+cfg.OutOfOrder))
	}
	return fmt.Errorf("checkEventTime called for %v", k)
}

func checkShares(t *testing.T, cfg Config, counts Counts, n int) {
	t.Helper()
	if got := counts.Total(); got != int64(n) {
		t.Fatalf("counts total %d, want %d", got, n)
	}
	want := [NumKinds]float64{
		OnTime:  1 - cfg.Late - cfg.TooLate - cfg.Future - cfg.Invalid,
		Late:    cfg.Late,
		TooLate: cfg.TooLate,
		Future:  cfg.Future,
		Invalid: cfg.Invalid,
	}
	const tol = 0.01 // several standard deviations at n = 40 000
	for k := OnTime; k < NumKinds; k++ {
		got := float64(counts[k]) / float64(n)
		if math.Abs(got-want[k]) > tol {
			t.Errorf("share of %v = %.4f, want %.4f ± %.2f", k, got, want[k], tol)
		}
	}
}

const bigBatch = 40_000

func TestSpans(t *testing.T) {
	cfg := testConfig()
	g := newGen(t, cfg, 1)
	td, counts := g.Spans(testNow, bigBatch)
	if td.SpanCount() != bigBatch {
		t.Fatalf("SpanCount = %d, want %d", td.SpanCount(), bigBatch)
	}
	checkShares(t, cfg, counts, bigBatch)

	var seen Counts
	series := map[[2]string]bool{}
	var logDur []float64
	errors := 0
	for _, r := range allSpans(td) {
		sp := r.span
		k, err := kindOf(sp.Attributes())
		if err != nil {
			t.Fatal(err)
		}
		seen[k]++
		series[[2]string{r.service, sp.Name()}] = true
		if sp.Kind() != ptrace.SpanKindServer {
			t.Fatalf("span kind %v, want server", sp.Kind())
		}
		if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
			t.Fatal("span without trace or span id")
		}
		method, _ := sp.Attributes().Get(AttrMethod)
		if !strings.HasPrefix(sp.Name(), method.Str()+" /api/item") {
			t.Fatalf("span name %q does not match method %q", sp.Name(), method.Str())
		}
		code, ok := sp.Attributes().Get(AttrStatusCode)
		if !ok {
			t.Fatal("span without status code")
		}
		switch code.Int() {
		case 200:
			if sp.Status().Code() == ptrace.StatusCodeError {
				t.Fatal("200 span with status ERROR")
			}
		case 500:
			errors++
			if sp.Status().Code() != ptrace.StatusCodeError {
				t.Fatal("500 span without status ERROR")
			}
		default:
			t.Fatalf("unexpected status code %d", code.Int())
		}

		start, end := sp.StartTimestamp(), sp.EndTimestamp()
		if k == Invalid {
			if start != 0 || end != 0 {
				t.Fatalf("invalid span with timestamps %d, %d", start, end)
			}
			continue
		}
		if end <= start {
			t.Fatalf("span duration not positive: start %d end %d", start, end)
		}
		logDur = append(logDur, math.Log(float64(end-start)))
		if err := checkEventTime(cfg, k, end.AsTime()); err != nil {
			t.Fatal(err)
		}
	}
	if seen != counts {
		t.Fatalf("kinds by attribute %v, returned counts %v", seen, counts)
	}
	if len(series) != cfg.Services*cfg.Series || g.SeriesCount() != len(series) {
		t.Fatalf("%d distinct series, want %d", len(series), cfg.Services*cfg.Series)
	}
	if share := float64(errors) / bigBatch; math.Abs(share-ErrorShare) > 0.01 {
		t.Errorf("error share %.4f, want %.2f ± 0.01", share, ErrorShare)
	}

	// The durations are lognormal: the mean and deviation of their logarithm give the median and sigma.
	var sum, sq float64
	for _, v := range logDur {
		sum += v
	}
	mean := sum / float64(len(logDur))
	for _, v := range logDur {
		sq += (v - mean) * (v - mean)
	}
	median := time.Duration(math.Exp(mean))
	sigma := math.Sqrt(sq / float64(len(logDur)))
	if median < 38*time.Millisecond || median > 42*time.Millisecond {
		t.Errorf("median span duration %v, want about %v", median, SpanMedian)
	}
	if math.Abs(sigma-SpanSigma) > 0.03 {
		t.Errorf("sigma of log duration %.3f, want about %.1f", sigma, SpanSigma)
	}
}

func TestLogs(t *testing.T) {
	cfg := testConfig()
	cfg.Late, cfg.TooLate, cfg.Future, cfg.Invalid = 0.2, 0.1, 0.05, 0.05
	g := newGen(t, cfg, 7)
	ld, counts := g.Logs(testNow, bigBatch)
	if ld.LogRecordCount() != bigBatch {
		t.Fatalf("LogRecordCount = %d, want %d", ld.LogRecordCount(), bigBatch)
	}
	checkShares(t, cfg, counts, bigBatch)

	var seen Counts
	services := map[string]bool{}
	severities := map[string]int{}
	for _, r := range allLogs(ld) {
		lr := r.rec
		k, err := kindOf(lr.Attributes())
		if err != nil {
			t.Fatal(err)
		}
		seen[k]++
		services[r.service] = true
		severities[lr.SeverityText()]++
		size, ok := lr.Attributes().Get(AttrBodySize)
		if !ok || size.Type() != pcommon.ValueTypeInt || size.Int() < 1 {
			t.Fatalf("bad body.size %v", size.AsRaw())
		}
		if k == Invalid {
			if lr.Timestamp() != 0 || lr.ObservedTimestamp() != 0 {
				t.Fatalf("invalid log with timestamps %d, %d", lr.Timestamp(), lr.ObservedTimestamp())
			}
			continue
		}
		if !lr.ObservedTimestamp().AsTime().Equal(testNow) {
			t.Fatalf("observed timestamp %v, want now", lr.ObservedTimestamp().AsTime())
		}
		if err := checkEventTime(cfg, k, lr.Timestamp().AsTime()); err != nil {
			t.Fatal(err)
		}
	}
	if seen != counts {
		t.Fatalf("kinds by attribute %v, returned counts %v", seen, counts)
	}
	if len(services) != cfg.Services {
		t.Fatalf("%d services, want %d", len(services), cfg.Services)
	}
	for _, s := range []string{"INFO", "WARN", "ERROR"} {
		if severities[s] == 0 {
			t.Errorf("no %s records: %v", s, severities)
		}
	}
	if severities["INFO"] < severities["WARN"] || severities["WARN"] < severities["ERROR"] {
		t.Errorf("severity mix not INFO > WARN > ERROR: %v", severities)
	}
}

func TestOnlyOnTimeWithoutJitter(t *testing.T) {
	cfg := testConfig()
	cfg.Late, cfg.TooLate, cfg.Future, cfg.Invalid, cfg.OutOfOrder = 0, 0, 0, 0, 0
	g := newGen(t, cfg, 3)
	td, counts := g.Spans(testNow, 500)
	if counts[OnTime] != 500 {
		t.Fatalf("counts %v, want all on time", counts)
	}
	for _, r := range allSpans(td) {
		if !r.span.EndTimestamp().AsTime().Equal(testNow) {
			t.Fatalf("end %v, want exactly now", r.span.EndTimestamp().AsTime())
		}
	}
}

func TestAllOfOneKind(t *testing.T) {
	for _, k := range []Kind{Late, TooLate, Future, Invalid} {
		cfg := testConfig()
		cfg.Late, cfg.TooLate, cfg.Future, cfg.Invalid = 0, 0, 0, 0
		switch k {
		case Late:
			cfg.Late = 1
		case TooLate:
			cfg.TooLate = 1
		case Future:
			cfg.Future = 1
		case Invalid:
			cfg.Invalid = 1
		}
		g := newGen(t, cfg, 5)
		_, sc := g.Spans(testNow, 300)
		_, lc := g.Logs(testNow, 300)
		if sc[k] != 300 || lc[k] != 300 {
			t.Errorf("%v = 1: span counts %v, log counts %v", k, sc, lc)
		}
	}
}

func TestDeterministic(t *testing.T) {
	marshal := func(seed uint64) []byte {
		g := newGen(t, testConfig(), seed)
		td, _ := g.Spans(testNow, 200)
		ld, _ := g.Logs(testNow.Add(time.Second), 200)
		var m1 ptrace.ProtoMarshaler
		var m2 plog.ProtoMarshaler
		a, err := m1.MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m2.MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		return append(a, b...)
	}
	if !bytes.Equal(marshal(42), marshal(42)) {
		t.Fatal("same seed gave different batches")
	}
	if bytes.Equal(marshal(42), marshal(43)) {
		t.Fatal("different seeds gave the same batches")
	}
}

func TestSeriesNames(t *testing.T) {
	cfg := testConfig()
	cfg.Services, cfg.Series = 2, 3
	g := newGen(t, cfg, 9)
	td, _ := g.Spans(testNow, 2000)
	got := map[string]bool{}
	for _, r := range allSpans(td) {
		got[r.service+" "+r.span.Name()] = true
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{
		"svc-1 GET /api/item1", "svc-1 GET /api/item3", "svc-1 POST /api/item2",
		"svc-2 GET /api/item1", "svc-2 GET /api/item3", "svc-2 POST /api/item2",
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("series %v, want %v", names, want)
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]func(*Config){
		"no services":       func(c *Config) { c.Services = 0 },
		"no series":         func(c *Config) { c.Series = 0 },
		"negative jitter":   func(c *Config) { c.OutOfOrder = -time.Second },
		"late above 1":      func(c *Config) { c.Late = 1.5 },
		"negative invalid":  func(c *Config) { c.Invalid = -0.1 },
		"NaN future":        func(c *Config) { c.Future = math.NaN() },
		"shares above 1":    func(c *Config) { c.Late, c.TooLate = 0.6, 0.5 },
		"negative late-by":  func(c *Config) { c.LateBy = -time.Second },
		"negative too-late": func(c *Config) { c.TooLateBy = -time.Second },
		"negative warm-up":  func(c *Config) { c.WarmUp = -time.Second },
	}
	for name, mutate := range bad {
		cfg := testConfig()
		mutate(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
		if _, err := New(cfg, rand.New(rand.NewPCG(1, 2))); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if err := testConfig().Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if _, err := New(testConfig(), nil); err == nil {
		t.Fatal("New accepted a nil rng")
	}
}

func TestKindString(t *testing.T) {
	if Late.String() != "late" || TooLate.String() != "too-late" || Kind(99).String() != "kind(99)" {
		t.Fatal("unexpected kind names")
	}
}
