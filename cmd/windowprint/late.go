package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// attrLateReason is the attribute the connector puts on a routed record: expired (later than
// allowed_lateness), future or invalid.
const attrLateReason = "window_aggregator.late.reason"

// lateTally is what came late since the last late line: the records that late firings added to
// windows already printed, and the records routed to the late pipelines.
type lateTally struct {
	// within holds, by aggregation, the records that its late firings counted (the count of a later
	// firing of a window is a delta: the late records alone), and windows the windows they went into.
	within  map[string]*lateCount
	windows map[window]bool
	spans   routed
	logs    routed
}

// lateCount is a number of records, and what they are: the unit of the count output ({span}).
type lateCount struct {
	n    int64
	unit string
}

// routed counts routed records by reason, and the least and greatest event time of the expired ones
// (the others are stamped in the future, or not at all).
type routed struct {
	n           int64
	reasons     map[string]int64
	first, last int64 // Unix ns; valid when timed
	timed       bool
}

// revision takes a point of a later firing of a window: its count adds to the late records.
func (t *lateTally) revision(p point) {
	if p.output != "count" || p.value <= 0 {
		return
	}
	if t.within == nil {
		t.within, t.windows = map[string]*lateCount{}, map[window]bool{}
	}
	c := t.within[p.agg]
	if c == nil {
		c = &lateCount{unit: p.unit}
		t.within[p.agg] = c
	}
	c.n += int64(p.value)
	t.windows[p.win] = true
}

// add counts a routed record with its attributes and event time (0: none). A record without a
// reason is taken for an expired one.
func (r *routed) add(attrs pcommon.Map, eventTime int64) {
	r.n++
	reason := "expired"
	if v, ok := attrs.Get(attrLateReason); ok {
		reason = v.AsString()
	}
	if r.reasons == nil {
		r.reasons = map[string]int64{}
	}
	r.reasons[reason]++
	if reason != "expired" || eventTime == 0 {
		return
	}
	if !r.timed || eventTime < r.first {
		r.first = eventTime
	}
	if !r.timed || eventTime > r.last {
		r.last = eventTime
	}
	r.timed = true
}

func (t *lateTally) empty() bool { return len(t.within) == 0 && t.spans.n == 0 && t.logs.n == 0 }

// line is the late line: "late: " and the records that came within allowed_lateness, into which
// windows, then those that came past it and were routed, with their event times:
//
//	late: 31 spans, 27 logs within allowed_lateness, into windows 19:12:00, 19:12:10 UTC; 13 spans, 17 logs past it, routed, event time 19:10:22-19:10:33 UTC
//
// Aggregations are named only where two count records of one kind (two of spans).
func (t *lateTally) line() string {
	if t.empty() {
		return "late: none"
	}
	var b strings.Builder
	b.WriteString("late: ")
	if len(t.within) == 0 {
		b.WriteString("none within allowed_lateness")
	} else {
		aggs := make([]string, 0, len(t.within))
		units := map[string]int{}
		for agg, c := range t.within {
			aggs = append(aggs, agg)
			units[c.unit]++
		}
		sort.Slice(aggs, func(i, j int) bool { // spans before logs, as the routed records are
			ui, uj := t.within[aggs[i]].unit, t.within[aggs[j]].unit
			if ui != uj {
				return ui > uj
			}
			return aggs[i] < aggs[j]
		})
		for i, agg := range aggs {
			if i > 0 {
				b.WriteString(", ")
			}
			c := t.within[agg]
			b.WriteString(recordCount(c.n, c.unit))
			if units[c.unit] > 1 {
				b.WriteString(" (" + agg + ")")
			}
		}
		b.WriteString(" within allowed_lateness, into windows ")
		b.WriteString(windowStarts(t.windows))
	}
	b.WriteString("; ")
	b.WriteString(t.routedPart())
	return b.String()
}

// routedPart is what the late line says of the routed records.
func (t *lateTally) routedPart() string {
	if t.spans.n == 0 && t.logs.n == 0 {
		return "none past it"
	}
	var parts []string
	var all routed
	for _, r := range []struct {
		routed
		what string
	}{{t.spans, "span"}, {t.logs, "log"}} {
		if r.n == 0 {
			continue
		}
		parts = append(parts, recordCount(r.n, "{"+r.what+"}"))
		all.merge(r.routed)
	}
	s := strings.Join(parts, ", ") + " past it, routed"
	if all.timed {
		first, last := clock(all.first/1e9*1e9), clock(all.last/1e9*1e9) // to the second
		if s += ", event time " + first; last != first {
			s += "-" + last
		}
		s += " UTC"
	}
	if others := otherReasons(all.reasons); others != "" {
		s += " (" + others + ")"
	}
	return s
}

// merge adds o's records to r's.
func (r *routed) merge(o routed) {
	if o.n == 0 {
		return
	}
	if r.reasons == nil {
		r.reasons = map[string]int64{}
	}
	for k, n := range o.reasons {
		r.reasons[k] += n
	}
	r.n += o.n
	if o.timed {
		if !r.timed || o.first < r.first {
			r.first = o.first
		}
		if !r.timed || o.last > r.last {
			r.last = o.last
		}
		r.timed = true
	}
}

// otherReasons names the routed records of other reasons than expired: "2 future, 1 invalid".
func otherReasons(reasons map[string]int64) string {
	var keys []string
	for k := range reasons {
		if k != "expired" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", reasons[k], k)
	}
	return strings.Join(parts, ", ")
}

// recordCount is n records of a count's unit: "25 spans"; a count of another unit, the number alone.
func recordCount(n int64, unit string) string {
	return withUnit(fmt.Sprint(n), unit)
}

// windowStarts lists the starts of windows in order, in UTC; past four, how many more.
func windowStarts(windows map[window]bool) string {
	starts := make([]int64, 0, len(windows))
	for w := range windows {
		if !slices.Contains(starts, w.start) {
			starts = append(starts, w.start)
		}
	}
	slices.Sort(starts)
	var parts []string
	for i, s := range starts {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(starts)-4))
			break
		}
		parts = append(parts, clock(s))
	}
	return strings.Join(parts, ", ") + " UTC"
}
