package windowaggregator

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
)

// Spans: the signal, and all of the component that knows ptrace: the walk that shows the core each
// span through the record view, the routing of late spans, and the instances that take traces.

var spanSignal = &signal{
	name: "spans", input: inputSpans, record: "span", fields: []string{"span.name", "span.kind", "status.code"},
	duration: true, adjustedCount: true, exemplars: true, kinds: true,
}

// The special keys of spans, by index in spanSignal.fields.
const (
	fieldSpanName = iota
	fieldSpanKind
	fieldStatusCode
)

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

// spanKindByConfig are the values of where.span_kind.
var spanKindByConfig = map[string]ptrace.SpanKind{
	"unspecified": ptrace.SpanKindUnspecified, "internal": ptrace.SpanKindInternal, "server": ptrace.SpanKindServer,
	"client": ptrace.SpanKindClient, "producer": ptrace.SpanKindProducer, "consumer": ptrace.SpanKindConsumer,
}

// spanReader is the record view of one span at a time, with what it reads of the span decided once
// per call from what the aggregations read: the kind and the status lie apart from the fields every
// aggregation reads (another cache line of the span), and so does the tracestate.
type spanReader struct {
	record
	sp                                            ptrace.Span
	readKind, readStatus, readIDs, readTraceState bool
}

var spanReaders = sync.Pool{New: func() any {
	rd := new(spanReader)
	rd.src = rd
	return rd
}}

// getSpanReader returns a reader for the span aggregations sa.
func getSpanReader(sa *signalAggs) *spanReader {
	rd := spanReaders.Get().(*spanReader)
	rd.readKind, rd.readStatus = sa.kinds || sa.reads(fieldSpanKind), sa.reads(fieldStatusCode)
	rd.readIDs, rd.readTraceState = sa.ids, sa.adjusted
	return rd
}

func (rd *spanReader) release() {
	rd.clear()
	rd.sp = ptrace.Span{}
	spanReaders.Put(rd)
}

// read points the view at span sp.
func (rd *spanReader) read(sp ptrace.Span) {
	rd.sp = sp
	rd.next(sp.Attributes())
	rd.field[fieldSpanName] = sp.Name()
	if rd.readKind {
		k := sp.Kind()
		rd.kind, rd.field[fieldSpanKind] = int32(k), enumName(spanKindNames[:], k)
	}
	if rd.readStatus {
		rd.field[fieldStatusCode] = enumName(statusCodeNames[:], sp.Status().Code())
	}
	rd.start, rd.end = uint64(sp.StartTimestamp()), uint64(sp.EndTimestamp())
	if rd.readTraceState {
		rd.traceState = sp.TraceState().AsRaw()
	}
}

func (rd *spanReader) weightSeed() uint64 { return weightSeed(rd.sp.TraceID(), rd.sp.SpanID(), 0, 0) }

// ingestTraces aggregates the spans of td. When action routes late data and some spans come too
// late, too early or without a timestamp, it returns copies of them and routed true.
func (s *shared) ingestTraces(ctx context.Context, td ptrace.Traces, action lateAction) (late ptrace.Traces, routed bool) {
	sa := &s.bySignal[inputSpans]
	if len(sa.aggs) == 0 {
		return late, false
	}
	rd := getSpanReader(sa)
	run := s.beginRun(&rd.record)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		run.setSource(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			rd.setScope(ss.Scope().Attributes(), rs.Resource().Attributes())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				rd.read(sp)
				if rd.readIDs {
					run.setIDs(sp.TraceID(), sp.SpanID())
				}
				run.stage(sa.aggs, timeOf(rd.end))
			}
		}
	}
	run.apply()
	if action == lateRouted && run.anyLate {
		late, routed = lateSpans(td, run.lateReason), true
	}
	run.finish(ctx, action)
	rd.release()
	return late, routed
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

// The instances that take traces. The connector's traces->metrics instance aggregates a batch unless
// a traces->traces instance exists, which the collector hands the same batches and which routes the
// late spans besides.

type tracesToMetrics struct{ instance }

func (c *tracesToMetrics) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if c.s.routes[inputSpans] {
		return nil // the traces->traces instance aggregates this batch
	}
	c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, false))
	return nil
}

type tracesToTraces struct {
	instance
	next consumer.Traces
}

func (c *tracesToTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	late, routed := c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, true))
	if !routed {
		return nil
	}
	return c.next.ConsumeTraces(ctx, late)
}

// tracesProcessor aggregates and passes every span on unchanged, late ones included.
type tracesProcessor struct {
	instance
	next consumer.Traces
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	p.s.ingestTraces(ctx, td, latePassed)
	return p.next.ConsumeTraces(ctx, td)
}

func createTracesToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &tracesToMetrics{newInstance(s, s.addSink(next, inputSpans), inputSpans, true)}, nil
}

func createTracesToTraces(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Traces) (connector.Traces, error) {
	s, err := acquireRouting(ctx, set, cfg, inputSpans)
	if err != nil {
		return nil, err
	}
	return &tracesToTraces{instance: newInstance(s, nil, inputSpans, true), next: next}, nil
}

func createTracesProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &tracesProcessor{instance: newInstance(s, nil, inputSpans, false), next: next}, nil
}
