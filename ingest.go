package windowaggregator

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/processor/serieskey"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// Late-data reasons, as counter attributes and as the value of the late-reason attribute.
const (
	reasonExpired = "expired"
	reasonFuture  = "future"
	reasonInvalid = "invalid"
)

// scratch is what one ingest call reuses: the series-key buffer and the record view with its cache.
type scratch struct {
	key  serieskey.Builder
	view recordView
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release returns the scratch to the pool, dropping its references to the batch's data.
func (sc *scratch) release() {
	sc.view.setScope(pcommon.Map{}, pcommon.Map{})
	sc.view.attrs = pcommon.Map{}
	scratchPool.Put(sc)
}

// tally counts one batch's outcomes, so that the counters are touched once per batch.
type tally struct {
	aggregated, lateUpdated, unmatched int64
	truncated                          int64
	late                               [3]int64 // expired, future, invalid
	values                             map[string]int64
}

func lateIndex(reason string) int {
	switch reason {
	case reasonFuture:
		return 1
	case reasonInvalid:
		return 2
	}
	return 0
}

var lateReasons = [3]string{reasonExpired, reasonFuture, reasonInvalid}

func (t *tally) missingValue(reason string) {
	if t.values == nil {
		t.values = map[string]int64{}
	}
	t.values[reason]++
}

// report adds the tally to the counters; action is what happened to late records.
func (s *shared) report(ctx context.Context, t *tally, action string) {
	tel := s.tel
	if t.aggregated > 0 {
		tel.records.Add(ctx, t.aggregated, attrOutcomeAggregated)
	}
	if t.lateUpdated > 0 {
		tel.records.Add(ctx, t.lateUpdated, attrOutcomeLateUpdated)
	}
	if t.unmatched > 0 {
		tel.records.Add(ctx, t.unmatched, attrOutcomeUnmatched)
	}
	for i, n := range t.late {
		if n > 0 {
			tel.records.Add(ctx, n, attrOutcomeLate)
			tel.late.Add(ctx, n, lateAttrs(lateReasons[i], action))
		}
	}
	if t.truncated > 0 {
		tel.truncatedKeys.Add(ctx, t.truncated)
	}
	for reason, n := range t.values {
		tel.valuesMissing.Add(ctx, n, reasonAttr(reason))
	}
}

// judge runs one record through the aggregations that select it and returns "" when it was
// aggregated (on time or late-updated) or selected by none, else the late reason.
func (s *shared) judge(b *stream.Batch, kb *serieskey.Builder, aggs []*aggregation, r *recordView, isSpan bool,
	t int64, start, end uint64, tl *tally) (reason string) {
	check := stream.OnTime
	lateUpdated, matched := false, false
	for _, a := range aggs {
		if !a.matches(r, isSpan) {
			continue
		}
		if !matched {
			matched = true
			if check = b.Check(t); check != stream.OnTime {
				break
			}
		}
		v, why := a.value(r, start, end)
		if why != valueOK {
			tl.missingValue(why)
		}
		if a.buildKey(kb, r) {
			tl.truncated++
		}
		switch b.Add(a.index, kb.Key(), t, v) {
		case stream.Expired:
			reason = reasonExpired
		case stream.LateUpdate:
			lateUpdated = true
		}
	}
	switch {
	case !matched:
		tl.unmatched++
		return ""
	case check == stream.Invalid:
		reason = reasonInvalid
	case check == stream.Future:
		reason = reasonFuture
	}
	switch {
	case reason != "":
		tl.late[lateIndex(reason)]++
	case lateUpdated:
		tl.lateUpdated++
	default:
		tl.aggregated++
	}
	return reason
}

// ingestTraces aggregates the spans of td. When late is not nil, the spans that come too late, too
// early or without a timestamp are copied into it.
func (s *shared) ingestTraces(ctx context.Context, td ptrace.Traces, late *lateTraces, action string) {
	if len(s.spanAggs) == 0 {
		return
	}
	var run ingestRun
	run.begin(s)
	defer run.finish(ctx, action)
	r := &run.sc.view
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			r.setScope(ss.Scope().Attributes(), rs.Resource().Attributes())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				r.attrs = sp.Attributes()
				r.spanName, r.spanKind, r.status = sp.Name(), sp.Kind(), sp.Status().Code()
				start, end := uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp())
				if reason := run.judge(s.spanAggs, true, timeOf(end), start, end); reason != "" && late != nil {
					late.add(rs, ss, sp, reason, run.b.Watermark())
				}
			}
		}
	}
}

// ingestLogs aggregates the log records of ld, as ingestTraces does for spans.
func (s *shared) ingestLogs(ctx context.Context, ld plog.Logs, late *lateLogs, action string) {
	if len(s.logAggs) == 0 {
		return
	}
	var run ingestRun
	run.begin(s)
	defer run.finish(ctx, action)
	r := &run.sc.view
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			r.setScope(sl.Scope().Attributes(), rl.Resource().Attributes())
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				r.attrs = lr.Attributes()
				r.severityText = lr.SeverityText()
				ts := uint64(lr.Timestamp())
				if ts == 0 {
					ts = uint64(lr.ObservedTimestamp())
				}
				if reason := run.judge(s.logAggs, false, timeOf(ts), 0, 0); reason != "" && late != nil {
					late.add(rl, sl, lr, reason, run.b.Watermark())
				}
			}
		}
	}
}

// ingestRun is one ingest call: its batch, its tally and its scratch.
type ingestRun struct {
	s  *shared
	b  stream.Batch
	tl tally
	sc *scratch
}

func (run *ingestRun) begin(s *shared) {
	run.s, run.sc = s, getScratch()
	run.b = s.engine.Begin(s.engine.Now())
}

// finish lets the batch move the watermark, reports its outcomes, and sends what fired.
func (run *ingestRun) finish(ctx context.Context, action string) {
	run.sc.release()
	run.b.End()
	s := run.s
	s.report(ctx, &run.tl, action)
	if s.engine.Due() {
		s.emitter.emit(ctx, true)
	}
}

// judge runs the current record of the view through aggs; see shared.judge.
func (run *ingestRun) judge(aggs []*aggregation, isSpan bool, t int64, start, end uint64) string {
	return run.s.judge(&run.b, &run.sc.key, aggs, &run.sc.view, isSpan, t, start, end, &run.tl)
}

// timeOf converts a pdata timestamp to the engine's int64. Anything past 2^62 ns (the year 2116) is
// beyond the engine's range, which rejects it as future.
func timeOf(ts uint64) int64 {
	if ts > 1<<62 {
		return 1 << 62
	}
	return int64(ts)
}
