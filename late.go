package windowaggregator

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attributes added to the late records that the connector routes.
const (
	attrLateReason = "window_aggregator.late.reason"    // expired | future | invalid
	attrWatermark  = "window_aggregator.late.watermark" // the watermark the record was judged by, Unix ns
)

func markLate(m pcommon.Map, reason string, watermark int64) {
	m.PutStr(attrLateReason, reason)
	if watermark != minWatermark {
		m.PutInt(attrWatermark, watermark)
	}
}

// lateSpans copies the spans of td that reasonOf names late into new Traces, under copies of their
// resource and scope, each marked with its reason and watermark. reasonOf takes a span's index in
// td's order and returns "" for a span that is not late.
func lateSpans(td ptrace.Traces, reasonOf func(i int) (string, int64)) ptrace.Traces {
	out := ptrace.NewTraces()
	n := 0
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		var outRS ptrace.ResourceSpans
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			var outSS ptrace.ScopeSpans
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k, n = k+1, n+1 {
				reason, w := reasonOf(n)
				if reason == "" {
					continue
				}
				if outRS == (ptrace.ResourceSpans{}) {
					outRS = out.ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(outRS.Resource())
					outRS.SetSchemaUrl(rs.SchemaUrl())
				}
				if outSS == (ptrace.ScopeSpans{}) {
					outSS = outRS.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(outSS.Scope())
					outSS.SetSchemaUrl(ss.SchemaUrl())
				}
				sp := outSS.Spans().AppendEmpty()
				spans.At(k).CopyTo(sp)
				markLate(sp.Attributes(), reason, w)
			}
		}
	}
	return out
}

// lateLogRecords copies the log records of ld that reasonOf names late, as lateSpans does for spans.
func lateLogRecords(ld plog.Logs, reasonOf func(i int) (string, int64)) plog.Logs {
	out := plog.NewLogs()
	n := 0
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		var outRL plog.ResourceLogs
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			var outSL plog.ScopeLogs
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k, n = k+1, n+1 {
				reason, w := reasonOf(n)
				if reason == "" {
					continue
				}
				if outRL == (plog.ResourceLogs{}) {
					outRL = out.ResourceLogs().AppendEmpty()
					rl.Resource().CopyTo(outRL.Resource())
					outRL.SetSchemaUrl(rl.SchemaUrl())
				}
				if outSL == (plog.ScopeLogs{}) {
					outSL = outRL.ScopeLogs().AppendEmpty()
					sl.Scope().CopyTo(outSL.Scope())
					outSL.SetSchemaUrl(sl.SchemaUrl())
				}
				lr := outSL.LogRecords().AppendEmpty()
				lrs.At(k).CopyTo(lr)
				markLate(lr.Attributes(), reason, w)
			}
		}
	}
	return out
}
