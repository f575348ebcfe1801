package windowaggregator

import (
	"context"
	"errors"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
)

// Logs: the signal, and all of the component that knows plog: the walk that shows the core each log
// record through the record view, the routing of late log records, and the instances that take logs.

var logSignal = &signal{name: "logs", input: inputLogs, record: "log", fields: []string{"severity.text"}, ottl: newLogOTTL}

// The special keys of logs, by index in logSignal.fields.
const fieldSeverityText = 0

// logReader is the record view of one log record at a time.
type logReader struct {
	record
	rl   plog.ResourceLogs
	sl   plog.ScopeLogs
	lr   plog.LogRecord
	tctx *ottllog.TransformContext // as spanReader's
}

var logReaders = sync.Pool{New: func() any {
	rd := new(logReader)
	rd.src = rd
	return rd
}}

func (rd *logReader) release() {
	rd.closeContext()
	rd.clear()
	rd.rl, rd.sl, rd.lr = plog.ResourceLogs{}, plog.ScopeLogs{}, plog.LogRecord{}
	logReaders.Put(rd)
}

// setScope points the view at the log records of sl, of rl.
func (rd *logReader) setScope(rl plog.ResourceLogs, sl plog.ScopeLogs) {
	rd.rl, rd.sl = rl, sl
	rd.record.setScope(sl.Scope().Attributes(), rl.Resource().Attributes())
}

// read points the view at log record lr, and returns its event time: its timestamp, else its observed
// timestamp.
func (rd *logReader) read(lr plog.LogRecord) int64 {
	if rd.tctx != nil {
		rd.closeContext()
	}
	rd.lr = lr
	rd.next(lr.Attributes())
	rd.field[fieldSeverityText] = lr.SeverityText()
	ts := uint64(lr.Timestamp())
	if ts == 0 {
		ts = uint64(lr.ObservedTimestamp())
	}
	return timeOf(ts)
}

func (rd *logReader) weightSeed() uint64 {
	return weightSeed(rd.lr.TraceID(), rd.lr.SpanID(), rd.lr.Timestamp(), rd.lr.ObservedTimestamp())
}

// context returns the log record's OTTL transform context, made on first use.
func (rd *logReader) context() *ottllog.TransformContext {
	if rd.tctx == nil {
		rd.tctx = ottllog.NewTransformContext(rd.rl, rd.sl, rd.lr)
	}
	return rd.tctx
}

func (rd *logReader) closeContext() {
	if rd.tctx != nil {
		rd.tctx.Close()
		rd.tctx = nil
	}
}

// newLogOTTL returns the parser of log aggregations' OTTL: the log context, with path context names
// (log., resource., scope.) and the standard converters.
func newLogOTTL(set component.TelemetrySettings) (ottlParser, error) {
	p, err := ottllog.NewParser(ottlfuncs.StandardConverters[*ottllog.TransformContext](), set, ottllog.EnablePathContextNames())
	return &contextParser[*ottllog.TransformContext]{p: p, contextOf: func(r *record) *ottllog.TransformContext {
		return r.src.(*logReader).context()
	}}, err
}

// ingestLogs aggregates the log records of ld, as ingestTraces does for spans.
func (s *shared) ingestLogs(ctx context.Context, ld plog.Logs, action lateAction) (late plog.Logs, routed bool, err error) {
	sa := &s.bySignal[inputLogs]
	if len(sa.aggs) == 0 {
		return late, false, nil
	}
	rd := logReaders.Get().(*logReader)
	run := s.beginRun(ctx, &rd.record)
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		run.setSource(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			rd.setScope(rl, sl)
			lrs := sl.LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				run.stage(sa.aggs, rd.read(lrs.At(k)))
			}
		}
	}
	run.apply()
	if action == lateRouted && run.anyLate {
		late, routed = lateLogRecords(ld, run.lateReason), true
	}
	err = run.finish(ctx, action)
	rd.release()
	return late, routed, err
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

// The instances that take logs, as those that take traces (spans.go).

type logsToMetrics struct{ instance }

func (c *logsToMetrics) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if c.s.routes[inputLogs] {
		return nil // the logs->logs instance aggregates this batch
	}
	_, _, err := c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, false))
	return err
}

type logsToLogs struct {
	instance
	next consumer.Logs
}

func (c *logsToLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	late, routed, err := c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, true))
	if routed {
		err = errors.Join(err, c.next.ConsumeLogs(ctx, late))
	}
	return err
}

type logsProcessor struct {
	instance
	next consumer.Logs
}

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	if _, _, err := p.s.ingestLogs(ctx, ld, latePassed); err != nil {
		return err // error_mode propagate: the batch is refused
	}
	return p.next.ConsumeLogs(ctx, ld)
}

func createLogsToMetrics(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Logs, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &logsToMetrics{newInstance(s, s.addSink(next, inputLogs), inputLogs, true)}, nil
}

func createLogsToLogs(ctx context.Context, set connector.Settings, cfg component.Config, next consumer.Logs) (connector.Logs, error) {
	s, err := acquireRouting(ctx, set, cfg, inputLogs)
	if err != nil {
		return nil, err
	}
	return &logsToLogs{instance: newInstance(s, nil, inputLogs, true), next: next}, nil
}

func createLogsProcessor(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	s, err := acquire(ctx, set.TelemetrySettings, set.ID, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &logsProcessor{instance: newInstance(s, nil, inputLogs, false), next: next}, nil
}
