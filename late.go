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

// lateTraces copies late spans, keeping their resource and scope, into a new ptrace.Traces.
type lateTraces struct {
	td     ptrace.Traces
	count  int
	lastRS ptrace.ResourceSpans // source of the last copied resource
	outRS  ptrace.ResourceSpans
	lastSS ptrace.ScopeSpans
	outSS  ptrace.ScopeSpans
}

func newLateTraces() *lateTraces { return &lateTraces{td: ptrace.NewTraces()} }

func (l *lateTraces) add(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans, sp ptrace.Span, reason string, watermark int64) {
	if l.count == 0 || l.lastRS != rs {
		l.lastRS, l.outRS = rs, l.td.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(l.outRS.Resource())
		l.outRS.SetSchemaUrl(rs.SchemaUrl())
		l.lastSS = ptrace.ScopeSpans{}
	}
	if l.lastSS != ss {
		l.lastSS, l.outSS = ss, l.outRS.ScopeSpans().AppendEmpty()
		ss.Scope().CopyTo(l.outSS.Scope())
		l.outSS.SetSchemaUrl(ss.SchemaUrl())
	}
	out := l.outSS.Spans().AppendEmpty()
	sp.CopyTo(out)
	markLate(out.Attributes(), reason, watermark)
	l.count++
}

// lateLogs copies late log records, keeping their resource and scope, into a new plog.Logs.
type lateLogs struct {
	ld     plog.Logs
	count  int
	lastRL plog.ResourceLogs
	outRL  plog.ResourceLogs
	lastSL plog.ScopeLogs
	outSL  plog.ScopeLogs
}

func newLateLogs() *lateLogs { return &lateLogs{ld: plog.NewLogs()} }

func (l *lateLogs) add(rl plog.ResourceLogs, sl plog.ScopeLogs, lr plog.LogRecord, reason string, watermark int64) {
	if l.count == 0 || l.lastRL != rl {
		l.lastRL, l.outRL = rl, l.ld.ResourceLogs().AppendEmpty()
		rl.Resource().CopyTo(l.outRL.Resource())
		l.outRL.SetSchemaUrl(rl.SchemaUrl())
		l.lastSL = plog.ScopeLogs{}
	}
	if l.lastSL != sl {
		l.lastSL, l.outSL = sl, l.outRL.ScopeLogs().AppendEmpty()
		sl.Scope().CopyTo(l.outSL.Scope())
		l.outSL.SetSchemaUrl(sl.SchemaUrl())
	}
	out := l.outSL.LogRecords().AppendEmpty()
	lr.CopyTo(out)
	markLate(out.Attributes(), reason, watermark)
	l.count++
}
