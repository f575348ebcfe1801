package ingest

import (
	"context"
	"encoding/binary"
	"iter"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/contexts/ottllog"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
)

// Logs: all of the component that knows plog: the reader that fills the record view log record by
// log record, the walk of a batch, and plog's names for the instances and the late copies.

// logReader is the record view of one log record at a time.
type logReader struct {
	Record
	rl   plog.ResourceLogs
	sl   plog.ScopeLogs
	lr   plog.LogRecord
	tctx transformContext[*ottllog.TransformContext]

	// For dedup: the parts that identify a record, the identities of its resource and scope (read
	// once per scope), and the buffer of its parts.
	idKey  LogKey
	hasher identityHasher
	outer  outerIdentities
	idBuf  []byte
}

var logReaders = sync.Pool{New: func() any {
	rd := new(logReader)
	rd.src = rd
	return rd
}}

func (rd *logReader) release() {
	rd.tctx.close()
	rd.clear()
	rd.rl, rd.sl, rd.lr = plog.ResourceLogs{}, plog.ScopeLogs{}, plog.LogRecord{}
	rd.outer.forget()
	logReaders.Put(rd)
}

// setScope points the view at the log records of sl, of rl.
func (rd *logReader) setScope(rl plog.ResourceLogs, sl plog.ScopeLogs) {
	if rl != rd.rl {
		rd.outer.forget()
	}
	rd.rl, rd.sl = rl, sl
	rd.outer.forgetScope()
	rd.Record.setScope(sl.Scope().Attributes(), rl.Resource().Attributes())
}

// read points the view at log record lr, and returns its event time: its timestamp, else its observed
// timestamp.
func (rd *logReader) read(lr plog.LogRecord) int64 {
	rd.tctx.close()
	rd.lr = lr
	rd.next(lr.Attributes())
	rd.Field[fieldSeverityText] = lr.SeverityText()
	ts := uint64(lr.Timestamp())
	if ts == 0 {
		ts = uint64(lr.ObservedTimestamp())
	}
	return timeOf(ts)
}

func (rd *logReader) weightSeed() uint64 {
	return weightSeed(rd.lr.TraceID(), rd.lr.SpanID(), rd.lr.Timestamp(), rd.lr.ObservedTimestamp())
}

// The indexes of the parts of a log record that dedup.logs.key may list, in the order the
// configuration's LogPart values are listed (and hashed), and how many there are.
const (
	logPartTime = iota
	logPartObservedTime
	logPartSeverity
	logPartBody
	logPartAttributes
	logPartResource
	logPartScope
	logPartTraceID
	logPartSpanID
	NumLogParts
)

// identity is the log record's identity for dedup: the parts its key lists, each tagged and hashed
// in the order of their indexes (a map's pairs in any order); none without a key.
func (rd *logReader) identity() (dedup.ID, bool) {
	if rd.idKey == 0 {
		return 0, false
	}
	lr, h := rd.lr, &rd.hasher
	b := rd.idBuf[:0]
	for part := range NumLogParts {
		if rd.idKey&(1<<part) == 0 {
			continue
		}
		b = append(b, byte(part))
		switch part {
		case logPartTime:
			b = binary.LittleEndian.AppendUint64(b, uint64(lr.Timestamp()))
		case logPartObservedTime:
			b = binary.LittleEndian.AppendUint64(b, uint64(lr.ObservedTimestamp()))
		case logPartSeverity:
			b = binary.LittleEndian.AppendUint32(b, uint32(lr.SeverityNumber()))
			b = binary.AppendUvarint(b, uint64(len(lr.SeverityText())))
			b = append(b, lr.SeverityText()...)
		case logPartBody:
			b = appendIdentity(b, h.hashValue(lr.Body()))
		case logPartAttributes:
			b = appendIdentity(b, h.hashMap(lr.Attributes()))
		case logPartResource:
			b = appendIdentity(b, rd.outer.resource(h, rd.rl.Resource().Attributes()))
		case logPartScope:
			b = appendIdentity(b, rd.outer.scope(h, rd.sl.Scope()))
		case logPartTraceID:
			tid := lr.TraceID()
			b = append(b, tid[:]...)
		case logPartSpanID:
			sid := lr.SpanID()
			b = append(b, sid[:]...)
		}
	}
	rd.idBuf = b
	return dedup.Hash(b), true
}

func (rd *logReader) ottlContext() any {
	return rd.tctx.get(func() *ottllog.TransformContext { return ottllog.NewTransformContext(rd.rl, rd.sl, rd.lr) })
}

// Logs aggregates the log records of ld, its late ones as action says; with LateRouted it returns a
// copy of the late ones, and routed true, when some are late. err is an OTTL error with error_mode
// propagate: the records are aggregated all the same, and the batch is to be refused.
func (c *Core) Logs(ctx context.Context, ld plog.Logs, action LateAction) (late plog.Logs, routed bool, err error) {
	sa := &c.BySignal[InputLogs]
	if len(sa.aggs) == 0 {
		return late, false, nil
	}
	rd := logReaders.Get().(*logReader)
	defer rd.release()
	rd.idKey = c.LogKey
	run := c.beginRun(ctx, InputLogs, &rd.Record)
	for _, rl := range ld.ResourceLogs().All() {
		run.setSource(rl.Resource().Attributes())
		for _, sl := range rl.ScopeLogs().All() {
			rd.setScope(rl, sl)
			for _, lr := range sl.LogRecords().All() {
				t := rd.read(lr)
				if sa.ids {
					run.setIDs(lr.TraceID(), lr.SpanID())
				}
				run.stage(sa.aggs, t)
			}
		}
	}
	return finishRun(run, action, func(reasonOf func(int) (string, int64)) plog.Logs { return lateCopy(&logLevels, ld, reasonOf) })
}

var logLevels = levels[plog.Logs, plog.ResourceLogs, plog.ScopeLogs, plog.LogRecord]{
	newBatch:  plog.NewLogs,
	resources: func(ld plog.Logs) iter.Seq2[int, plog.ResourceLogs] { return ld.ResourceLogs().All() },
	scopes:    func(rl plog.ResourceLogs) iter.Seq2[int, plog.ScopeLogs] { return rl.ScopeLogs().All() },
	records:   func(sl plog.ScopeLogs) iter.Seq2[int, plog.LogRecord] { return sl.LogRecords().All() },
	addResource: func(ld plog.Logs, rl plog.ResourceLogs) plog.ResourceLogs {
		out := ld.ResourceLogs().AppendEmpty()
		rl.Resource().CopyTo(out.Resource())
		out.SetSchemaUrl(rl.SchemaUrl())
		return out
	},
	addScope: func(rl plog.ResourceLogs, sl plog.ScopeLogs) plog.ScopeLogs {
		out := rl.ScopeLogs().AppendEmpty()
		sl.Scope().CopyTo(out.Scope())
		out.SetSchemaUrl(sl.SchemaUrl())
		return out
	},
	addRecord: func(sl plog.ScopeLogs, lr plog.LogRecord) pcommon.Map {
		out := sl.LogRecords().AppendEmpty()
		lr.CopyTo(out)
		return out.Attributes()
	},
}
