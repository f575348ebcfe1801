package windowaggregator

import (
	"context"
	"errors"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottlspan"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
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
	duration: true, adjustedCount: true, exemplars: true, kinds: true, ottl: newSpanOTTL,
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
	rs                                            ptrace.ResourceSpans
	ss                                            ptrace.ScopeSpans
	sp                                            ptrace.Span
	readKind, readStatus, readIDs, readTraceState bool
	// tctx is the span's OTTL transform context, made when an aggregation's OTTL first asks (see
	// context) and closed when the view moves on.
	tctx *ottlspan.TransformContext
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
	rd.closeContext()
	rd.clear()
	rd.rs, rd.ss, rd.sp = ptrace.ResourceSpans{}, ptrace.ScopeSpans{}, ptrace.Span{}
	spanReaders.Put(rd)
}

// setScope points the view at the spans of ss, of rs.
func (rd *spanReader) setScope(rs ptrace.ResourceSpans, ss ptrace.ScopeSpans) {
	rd.rs, rd.ss = rs, ss
	rd.record.setScope(ss.Scope().Attributes(), rs.Resource().Attributes())
}

// read points the view at span sp, of the scope setScope named.
func (rd *spanReader) read(sp ptrace.Span) {
	if rd.tctx != nil {
		rd.closeContext()
	}
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

// context returns the span's OTTL transform context, made on first use.
func (rd *spanReader) context() *ottlspan.TransformContext {
	if rd.tctx == nil {
		rd.tctx = ottlspan.NewTransformContext(rd.rs, rd.ss, rd.sp)
	}
	return rd.tctx
}

func (rd *spanReader) closeContext() {
	if rd.tctx != nil {
		rd.tctx.Close()
		rd.tctx = nil
	}
}

// newSpanOTTL returns the parser of span aggregations' OTTL: the span context, with path context
// names (span., resource., scope.) and the standard converters.
func newSpanOTTL(set component.TelemetrySettings) (ottlParser, error) {
	p, err := ottlspan.NewParser(ottlfuncs.StandardConverters[*ottlspan.TransformContext](), set, ottlspan.EnablePathContextNames())
	return &contextParser[*ottlspan.TransformContext]{p: p, contextOf: func(r *record) *ottlspan.TransformContext {
		return r.src.(*spanReader).context()
	}}, err
}

// ingestTraces aggregates the spans of td. When action routes late data and some spans come too
// late, too early or without a timestamp, it returns copies of them and routed true. err is an OTTL
// error with error_mode propagate: the spans are aggregated all the same, and the batch is to be
// refused.
func (s *shared) ingestTraces(ctx context.Context, td ptrace.Traces, action lateAction) (late ptrace.Traces, routed bool, err error) {
	sa := &s.bySignal[inputSpans]
	if len(sa.aggs) == 0 {
		return late, false, nil
	}
	rd := getSpanReader(sa)
	run := s.beginRun(ctx, &rd.record)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		run.setSource(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			rd.setScope(rs, ss)
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
	err = run.finish(ctx, action)
	rd.release()
	return late, routed, err
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
	_, _, err := c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, false))
	return err
}

type tracesToTraces struct {
	instance
	next consumer.Traces
}

func (c *tracesToTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	late, routed, err := c.s.ingestTraces(ctx, td, lateActionFor(c.s.cfg, true))
	if routed {
		err = errors.Join(err, c.next.ConsumeTraces(ctx, late))
	}
	return err
}

// tracesProcessor aggregates and passes every span on unchanged, late ones included.
type tracesProcessor struct {
	instance
	next consumer.Traces
}

func (p *tracesProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if _, _, err := p.s.ingestTraces(ctx, td, latePassed); err != nil {
		return err // error_mode propagate: the batch is refused
	}
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
