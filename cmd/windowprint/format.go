package main

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// window is a span of event time [start, end), Unix nanoseconds: a window, or a slide of one.
type window struct{ start, end int64 }

// utc is the time of Unix nanoseconds ns, in UTC.
func utc(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// clock is the time of day of ns in UTC, 15:04:05, with the fraction of a second when there is one.
func clock(ns int64) string {
	return utc(ns).Format("15:04:05.999999999")
}

// bounds is how a window header names w: its date and times of day in UTC, the end's date only when
// it is another day.
func bounds(w window) string {
	start, end := utc(w.start), utc(w.end)
	s := start.Format("2006-01-02") + " " + clock(w.start) + " to "
	if end.Format("2006-01-02") != start.Format("2006-01-02") {
		s += end.Format("2006-01-02") + " "
	}
	return s + clock(w.end) + " UTC"
}

// number formats a value with about three significant digits, without an exponent from 0.001 up:
// 0.0123, 1.23, 12.3, 123, 12345.
func number(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a < 1:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	decimals := 2 // [1, 10)
	if a >= 100 {
		decimals = 0
	} else if a >= 10 {
		decimals = 1
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if r, _ := strconv.ParseFloat(s, 64); decimals > 0 && math.Abs(r) >= math.Pow10(3-decimals) {
		s = strconv.FormatFloat(v, 'f', decimals-1, 64) // rounded up into the next band: 99.97 is 100
	}
	return s
}

// withUnit appends a metric's unit to a formatted value: a unit of measure directly (52.1ms, 3.2s), an
// annotation after a space without its braces, a lone one as a plural but after 1 (312 requests,
// 1 request, 4.1 span/s). A unit of "1" or none adds nothing.
func withUnit(value, unit string) string {
	switch {
	case unit == "" || unit == "1":
		return value
	case !strings.Contains(unit, "{"):
		return value + unit
	}
	if word, ok := strings.CutPrefix(unit, "{"); ok && strings.HasSuffix(word, "}") && !strings.ContainsAny(word[:len(word)-1], "{}") {
		if word = word[:len(word)-1]; value != "1" {
			word = plural(word)
		}
		return value + " " + word
	}
	return value + " " + strings.NewReplacer("{", "", "}", "").Replace(unit)
}

// plural is the plural of an annotation's word: span, spans; log, logs.
func plural(word string) string {
	if word == "" || strings.HasSuffix(word, "s") {
		return word
	}
	return word + "s"
}

// pad appends spaces to s up to width characters.
func pad(s string, width int) string {
	if n := width - len(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}
