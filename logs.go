package windowaggregator

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor"
)

// Logs: the signal, and all of the component that knows plog: the walk that shows the core each log
// record through the record view, the routing of late log records, and the instances that take logs.

var logSignal = &signal{name: "logs", input: inputLogs, record: "log", fields: []string{"severity.text"}}

// The special keys of logs, by index in logSignal.fields.
const fieldSeverityText = 0

// logReader is the record view of one log record at a time.
type logReader struct {
	record
	lr plog.LogRecord
}

var logReaders = sync.Pool{New: func() any {
	rd := new(logReader)
	rd.src = rd
	return rd
}}

func (rd *logReader) release() {
	rd.clear()
	rd.lr = plog.LogRecord{}
	logReaders.Put(rd)
}

// read points the view at log record lr, and returns its event time: its timestamp, else its observed
// timestamp.
func (rd *logReader) read(lr plog.LogRecord) int64 {
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

// ingestLogs aggregates the log records of ld, as ingestTraces does for spans.
func (s *shared) ingestLogs(ctx context.Context, ld plog.Logs, action lateAction) (late plog.Logs, routed bool) {
	sa := &s.bySignal[inputLogs]
	if len(sa.aggs) == 0 {
		return late, false
	}
	rd := logReaders.Get().(*logReader)
	run := s.beginRun(&rd.record)
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		run.setSource(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			sl := sls.At(j)
			rd.setScope(sl.Scope().Attributes(), rl.Resource().Attributes())
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
	run.finish(ctx, action)
	rd.release()
	return late, routed
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
	c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, false))
	return nil
}

type logsToLogs struct {
	instance
	next consumer.Logs
}

func (c *logsToLogs) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	late, routed := c.s.ingestLogs(ctx, ld, lateActionFor(c.s.cfg, true))
	if !routed {
		return nil
	}
	return c.next.ConsumeLogs(ctx, late)
}

type logsProcessor struct {
	instance
	next consumer.Logs
}

func (p *logsProcessor) ConsumeLogs(ctx context.Context, ld plog.Logs) error {
	p.s.ingestLogs(ctx, ld, latePassed)
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
