package e2e

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// sampledSpans is the request spans(ss...) makes, with every span's tracestate set to traceState.
func sampledSpans(traceState string, ss ...span) ptraceotlp.ExportRequest {
	req := spans(ss...)
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rss.At(i).ScopeSpans().At(0).Spans().At(0).TraceState().FromRaw(traceState)
	}
	return req
}

// Spans sampled at thresholds written in their tracestate, sent over OTLP to the built distribution,
// count at their adjusted counts all the way into Prometheus, by scrape, remote write and through
// delta_to_cumulative: the latest count, sum and histogram of every series are the weighted totals,
// a late sampled span within allowed_lateness included, with no counter reset.
func TestPrometheusSeesWeightedTotals(t *testing.T) {
	skipShort(t)
	prom, col, c := startChain(t) // the default weight, adjusted_count, on both connectors

	base := (time.Now().UnixNano()/(2*sec))*(2*sec) - 60*sec // windows [B, B+2), [B+2, B+4), ...
	at := func(s float64) int64 { return base + int64(s*float64(sec)) }
	sent := newSentTotals()
	// Adjusted counts: th:8 is 2, th:c 4, th:e 8, th:0 1; a span without a tracestate weighs 1.
	send := func(traceState string, weight float64, ss ...span) {
		t.Helper()
		sent.addWeighted(weight, ss...)
		sendAll(t, c, sampledSpans(traceState, ss...))
	}
	a := func(s, ms float64) span { return span{"a", "/x", at(s), ms} }
	b := func(s, ms float64) span { return span{"b", "/x", at(s), ms} }

	send("ot=th:8", 2, a(0.2, 5), b(1.2, 800))
	send("ot=th:c", 4, a(0.6, 30))
	send("vendor=x,ot=th:e;rv:0123456789abcd", 8, b(0.4, 200))
	send("", 1, a(3.5, 120)) // W = B+2.5: [B, B+2) fires
	waitFired(t, prom, at(2))
	send("ot=th:c", 4, a(1.5, 70)) // late for [B, B+2), within allowed_lateness
	send("ot=th:e", 8, a(5.5, 70))
	send("ot=th:0", 1, b(5.2, 5))                         // W = B+4.5
	sendAll(t, c, spans(span{"flush", "/x", at(9.5), 5})) // W = B+8.5: ends 4, 6 and 8 pass
	waitFired(t, prom, at(6))
	waitFired(t, prom, at(8), "remote_write") // no records in [B+6, B+8): a cumulative point, no delta one

	// a: 2 + 4 + 1 + 4 + 8 = 19 spans, b: 2 + 8 + 1 = 11; cumulative points at B+2, 4, 6, 8.
	if sent.count["a"] != 19 || sent.count["b"] != 11 {
		t.Fatalf("ledger %v, want a 19 and b 11", sent.count)
	}
	checkTrueTotals(t, prom, sent, col, 4)
}
