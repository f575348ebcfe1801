package main

import (
	"math"
	"testing"
	"time"
)

func TestNumber(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {3, "3"}, {12345, "12345"}, {-7, "-7"},
		{123.4, "123"}, {99.97, "100"}, {9.996, "10.0"}, {62.34, "62.3"}, {1.234, "1.23"}, {0.01234, "0.0123"},
		{math.NaN(), "NaN"}, {math.Inf(1), "+Inf"},
	} {
		if got := number(c.v); got != c.want {
			t.Errorf("number(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestWithUnit(t *testing.T) {
	for _, c := range []struct{ value, unit, want string }{
		{"52.1", "ms", "52.1ms"},
		{"3", "s", "3s"},
		{"12", "ms2", "12ms2"},
		{"312", "{request}", "312 requests"},
		{"1", "{span}", "1 span"},
		{"2", "{span}", "2 spans"},
		{"4", "{records}", "4 records"},
		{"4.1", "{span}/s", "4.1 span/s"},
		{"9", "1", "9"},
		{"9", "", "9"},
	} {
		if got := withUnit(c.value, c.unit); got != c.want {
			t.Errorf("withUnit(%q, %q) = %q, want %q", c.value, c.unit, got, c.want)
		}
	}
}

func TestBoundsAreUTC(t *testing.T) {
	// 2026-12-07 19:05:30 in UTC+8 is 11:05:30 UTC: the bounds say UTC whatever the local zone.
	east := time.FixedZone("UTC+8", 8*3600)
	start := time.Date(2026, 12, 7, 19, 5, 30, 0, east).UnixNano()
	if got, want := bounds(window{start, start + 10e9}), "2026-12-07 11:05:30 to 11:05:40 UTC"; got != want {
		t.Errorf("bounds = %q, want %q", got, want)
	}
	// A window across midnight names the end's day; a fraction of a second is kept.
	start = time.Date(2026, 12, 7, 23, 59, 55, 0, time.UTC).UnixNano()
	if got, want := bounds(window{start, start + 5500e6}), "2026-12-07 23:59:55 to 2026-12-08 00:00:00.5 UTC"; got != want {
		t.Errorf("bounds = %q, want %q", got, want)
	}
}

func TestSplitName(t *testing.T) {
	for _, c := range []struct{ name, agg, output string }{
		{"http.server.duration.p99", "http.server.duration", "p99"},
		{"http.server.duration.p999", "http.server.duration", "p999"},
		{"http.server.duration.count", "http.server.duration", "count"},
		{"log.volume.count", "log.volume", "count"},
		{"http.server.requests.by_service.sum", "http.server.requests.by_service", "sum"},
		{"req.stdvar", "req", "stdvar"},
		{"req.rate", "req", "rate"},
		{"req.histogram", "req", "histogram"},
		{"logins.distinct.user.id", "logins", "distinct.user.id"},
		{"logins.distinct.trace_id", "logins", "distinct.trace_id"},
		{"some.other.metric", "some.other.metric", "value"},
		{"plain", "plain", "value"},
	} {
		agg, output := splitName(c.name)
		if agg != c.agg || output != c.output {
			t.Errorf("splitName(%q) = %q, %q; want %q, %q", c.name, agg, output, c.agg, c.output)
		}
	}
}

func TestOutputRankOrdersALine(t *testing.T) {
	order := []string{"count", "sum", "rate", "avg", "min", "p50", "p95", "p99", "p999", "max", "stddev", "stdvar", "histogram", "distinct.user.id", "value"}
	for i := 1; i < len(order); i++ {
		if outputRank(order[i-1]) >= outputRank(order[i]) {
			t.Errorf("%s does not come before %s", order[i-1], order[i])
		}
	}
}
