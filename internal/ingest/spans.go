package ingest

import (
	"context"
	"iter"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
)

// Spans: all of the component that knows ptrace: the reader that fills the record view span by
// span, the walk of a batch, and ptrace's names for the instances and the late copies.

var spanKindNames = [...]string{
	ptrace.SpanKindUnspecified: "SPAN_KIND_UNSPECIFIED", ptrace.SpanKindInternal: "SPAN_KIND_INTERNAL",
	ptrace.SpanKindServer: "SPAN_KIND_SERVER", ptrace.SpanKindClient: "SPAN_KIND_CLIENT",
	ptrace.SpanKindProducer: "SPAN_KIND_PRODUCER", ptrace.SpanKindConsumer: "SPAN_KIND_CONSUMER",
}

var statusCodeNames = [...]string{
	ptrace.StatusCodeUnset: "STATUS_CODE_UNSET", ptrace.StatusCodeOk: "STATUS_CODE_OK", ptrace.StatusCodeError: "STATUS_CODE_ERROR",
}

// enumName returns names[i], or "" for a value outside the enum (OTLP carries any int32).
func enumName[T ~int32](names []string, i T) string {
	if uint32(i) < uint32(len(names)) {
		return names[i]
	}
	return ""
}

// spanReader is the record view of one span at a time, with what it reads of the span decided once
// per call from what the aggregations read: the kind and the status lie apart from the fields every
// aggregation reads (another cache line of the span), and so does the tracestate.
type spanReader struct {
	Record
	rs                                            ptrace.ResourceSpans
	ss                                            ptrace.ScopeSpans
	sp                                            ptrace.Span
	readKind, readStatus, readIDs, readTraceState bool
	tctx                                          transformContext[*ottlspan.TransformContext]
}

var spanReaders = sync.Pool{New: func() any {
	rd := new(spanReader)
	rd.src = rd
	return rd
}}

// GetSpanReader returns a reader for the span aggregations sa.
func GetSpanReader(sa *SignalAggs) *spanReader {
	rd := spanReaders.Get().(*spanReader)
	rd.readKind, rd.readStatus = sa.kinds || sa.reads(fieldSpanKind), sa.reads(fieldStatusCode)
	rd.readIDs, rd.readTraceState = sa.ids, sa.adjusted
	return rd
}

func (rd *spanReader) Release() {
	rd.tctx.close()
	rd.clear()
	rd.rs, rd.ss, rd.sp = ptrace.ResourceSpans{}, ptrace.ScopeSpans{}, ptrace.Span{}
	spanReaders.Put(rd)
}

// SetScope points the view at the spans of ss, of rs.
func (rd *spanReader) SetScope(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans) {
	rd.rs, rd.ss = rs, ss
	rd.Record.setScope(ss.Scope().Attributes(), rs.Resource().Attributes())
}

// Read points the view at span sp, of the scope SetScope named.
func (rd *spanReader) Read(sp ptrace.Span) {
	rd.tctx.close()
	rd.sp = sp
	rd.next(sp.Attributes())
	rd.Field[FieldSpanName] = sp.Name()
	if rd.readKind {
		k := sp.Kind()
		rd.kind, rd.Field[fieldSpanKind] = int32(k), enumName(spanKindNames[:], k)
	}
	if rd.readStatus {
		rd.Field[fieldStatusCode] = enumName(statusCodeNames[:], sp.Status().Code())
	}
	rd.start, rd.end = uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp())
	if rd.readTraceState {
		rd.traceState = sp.TraceState().AsRaw()
	}
}

func (rd *spanReader) weightSeed() uint64 { return weightSeed(rd.sp.TraceID(), rd.sp.SpanID(), 0, 0) }

// identity is the span's identity for dedup: its trace id, span id and kind (Zipkin's clients and
// servers share a span id); none for a span without a valid trace id or span id.
func (rd *spanReader) identity() (dedup.ID, bool) {
	tid, sid := rd.sp.TraceID(), rd.sp.SpanID()
	if tid.IsEmpty() || sid.IsEmpty() {
		return 0, false
	}
	return dedup.Span(tid, sid, int32(rd.sp.Kind())), true
}

func (rd *spanReader) ottlContext() any {
	return rd.tctx.get(func() *ottlspan.TransformContext { return ottlspan.NewTransformContext(rd.rs, rd.ss, rd.sp) })
}

// Traces aggregates the spans of td, as Logs does its records.
func (c *Core) Traces(ctx context.Context, td ptrace.Traces, action LateAction) (late ptrace.Traces, routed bool, err error) {
	sa := &c.BySignal[InputSpans]
	if len(sa.aggs) == 0 {
		return late, false, nil
	}
	rd := GetSpanReader(sa)
	defer rd.Release()
	run := c.beginRun(ctx, InputSpans, &rd.Record)
	for _, rs := range td.ResourceSpans().All() {
		run.setSource(rs.Resource().Attributes())
		for _, ss := range rs.ScopeSpans().All() {
			rd.SetScope(rs, ss)
			for _, sp := range ss.Spans().All() {
				rd.Read(sp)
				if rd.readIDs {
					run.setIDs(sp.TraceID(), sp.SpanID())
				}
				run.stage(sa.aggs, timeOf(rd.end))
			}
		}
	}
	return finishRun(run, action, func(reasonOf func(int) (string, int64)) ptrace.Traces { return lateCopy(&traceLevels, td, reasonOf) })
}

var traceLevels = levels[ptrace.Traces, ptrace.ResourceSpans, ptrace.ScopeSpans, ptrace.Span]{
	newBatch:  ptrace.NewTraces,
	resources: func(td ptrace.Traces) iter.Seq2[int, ptrace.ResourceSpans] { return td.ResourceSpans().All() },
	scopes:    func(rs ptrace.ResourceSpans) iter.Seq2[int, ptrace.ScopeSpans] { return rs.ScopeSpans().All() },
	records:   func(ss ptrace.ScopeSpans) iter.Seq2[int, ptrace.Span] { return ss.Spans().All() },
	addResource: func(td ptrace.Traces, rs ptrace.ResourceSpans) ptrace.ResourceSpans {
		out := td.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(out.Resource())
		out.SetSchemaUrl(rs.SchemaUrl())
		return out
	},
	addScope: func(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans) ptrace.ScopeSpans {
		out := rs.ScopeSpans().AppendEmpty()
		ss.Scope().CopyTo(out.Scope())
		out.SetSchemaUrl(ss.SchemaUrl())
		return out
	},
	addRecord: func(ss ptrace.ScopeSpans, sp ptrace.Span) pcommon.Map {
		out := ss.Spans().AppendEmpty()
		sp.CopyTo(out)
		return out.Attributes()
	},
}
