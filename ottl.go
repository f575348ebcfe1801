package windowaggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/processor/serieskey"
)

// An aggregation's OTTL (contrib's pkg/ottl, with path context names): where.conditions, computed
// group_by keys and a value expression. Each signal's file parses them for its transform context
// (ottlspan, ottllog) and evaluates them against the record the view holds.

// ottlCondition is a parsed condition, and ottlValue a parsed value expression, of the view's record.
type (
	ottlCondition func(ctx context.Context, r *record) (bool, error)
	ottlValue     func(ctx context.Context, r *record) (any, error)
)

// ottlParser parses one signal's OTTL; parse errors are the parser's own, which name the position
// and the reason (a path its context lacks, a function it does not know).
type ottlParser interface {
	condition(expr string) (ottlCondition, error)
	value(expr string) (ottlValue, error)
}

// contextParser is a signal's ottlParser: its parser for its transform context K, evaluated against
// the context of the view's record (recordSource.ottlContext).
type contextParser[K any] struct{ p ottl.Parser[K] }

func (o *contextParser[K]) condition(expr string) (ottlCondition, error) {
	c, err := o.p.ParseCondition(expr)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r *record) (bool, error) { return c.Eval(ctx, r.src.ottlContext().(K)) }, nil
}

func (o *contextParser[K]) value(expr string) (ottlValue, error) {
	e, err := o.p.ParseValueExpression(expr)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r *record) (any, error) { return e.Eval(ctx, r.src.ottlContext().(K)) }, nil
}

// parserOf returns the constructor of a signal's OTTL parser: newParser of its context package, with
// path context names (span., log., datapoint., resource., scope.) and the standard converters.
func parserOf[K any, O any](newParser func(map[string]ottl.Factory[K], component.TelemetrySettings, ...O) (ottl.Parser[K], error),
	pathContextNames func() O) func(component.TelemetrySettings) (ottlParser, error) {
	return func(set component.TelemetrySettings) (ottlParser, error) {
		p, err := newParser(ottlfuncs.StandardConverters[K](), set, pathContextNames())
		return &contextParser[K]{p: p}, err
	}
}

// newParser returns the signal's OTTL parser, with the standard converters.
func (sg *signal) newParser(set component.TelemetrySettings) (ottlParser, error) {
	if sg.ottl == nil {
		return nil, fmt.Errorf("%s take no OTTL", sg.name)
	}
	return sg.ottl(set)
}

// validationSettings are the telemetry settings OTTL is parsed with when a configuration is
// validated: the parser only logs.
var validationSettings = component.TelemetrySettings{Logger: zap.NewNop()}

// The clauses an OTTL error is counted under.
type ottlClause uint8

const (
	clauseWhere ottlClause = iota
	clauseGroupBy
	clauseValue
	numOTTLClauses
)

var ottlClauseNames = [numOTTLClauses]string{clauseWhere: "where", clauseGroupBy: "group_by", clauseValue: "value"}

// ottlFailure is the OTTL errors of one aggregation and clause in one ingest call, with the last.
type ottlFailure struct {
	agg    int
	clause ottlClause
	n      int64
	last   error
}

// ottlErrors are the OTTL errors of one ingest call: by aggregation and clause, to be counted, and with
// error_mode propagate the first, which the call returns.
type ottlErrors struct {
	propagate bool
	first     error
	failures  []ottlFailure
}

// add records an OTTL error on the record being read. The record goes on as ignore says (the
// condition false, the key or the value missing).
func (e *ottlErrors) add(a *aggregation, clause ottlClause, err error) {
	if e.first == nil && e.propagate {
		e.first = fmt.Errorf("aggregation %q: %s: %w", a.name, ottlClauseNames[clause], err)
	}
	fs := e.failures
	for i := range fs {
		if fs[i].agg == a.index && fs[i].clause == clause {
			fs[i].n++
			fs[i].last = err
			return
		}
	}
	e.failures = append(fs, ottlFailure{agg: a.index, clause: clause, n: 1, last: err})
}

// reset empties e for another call, keeping its buffer.
func (e *ottlErrors) reset() {
	clear(e.failures)
	*e = ottlErrors{failures: e.failures[:0]}
}

// ottlErrorLogInterval bounds how often ignore logs OTTL errors: the first, then at most one line a
// minute with the count since.
const ottlErrorLogInterval = time.Minute

// reportOTTL counts an ingest call's OTTL errors and, with error_mode ignore, logs them at a bounded
// rate.
func (s *shared) reportOTTL(ctx context.Context, fs []ottlFailure) {
	for _, f := range fs {
		s.tel.WindowAggregatorOttlErrors.Add(ctx, f.n, s.aggs[f.agg].ottlErrorOptions[f.clause]...)
	}
	if s.cfg.ErrorMode != ottl.IgnoreError && s.cfg.ErrorMode != "" {
		return
	}
	s.ottlLogMu.Lock()
	defer s.ottlLogMu.Unlock()
	for _, f := range fs {
		s.ottlUnlogged += f.n
		s.ottlLast = f
	}
	if now := time.Now(); s.ottlUnlogged > 0 && now.Sub(s.ottlLoggedAt) >= ottlErrorLogInterval {
		last := s.ottlLast
		s.logger.Warn("OTTL errors: the records count as error_mode says (ignore: condition false, key or value missing)",
			zap.Int64("errors", s.ottlUnlogged), zap.String("aggregation", s.aggs[last.agg].name),
			zap.String("clause", ottlClauseNames[last.clause]), zap.Error(last.last))
		s.ottlUnlogged, s.ottlLoggedAt = 0, now
	}
}

// appendComputed appends the value v of a computed group_by key to the key: strings, ints, doubles,
// bools and bytes as they are, maps and slices as their JSON form. ok is false for nil (the record
// lacks the key) and for a value of no such type.
func appendComputed(b *serieskey.Builder, v any) (ok, truncated bool) {
	switch x := v.(type) {
	case nil:
		return false, false
	case string:
		if len(x) > maxKeyValueLen {
			x, truncated = cutUTF8(x, maxKeyValueLen), true
		}
		b.Str(serieskey.Record, x)
	case int64:
		b.Int(serieskey.Record, x)
	case float64:
		b.Double(serieskey.Record, x)
	case bool:
		b.Bool(serieskey.Record, x)
	case []byte:
		if len(x) > maxKeyValueLen {
			x, truncated = x[:maxKeyValueLen], true
		}
		b.Bytes(serieskey.Record, x)
	case pcommon.Value:
		if x.Type() == pcommon.ValueTypeEmpty {
			return false, false
		}
		return true, appendValue(b, serieskey.Record, x)
	case pcommon.Map:
		return true, appendValue(b, serieskey.Record, mapValue(x))
	case pcommon.Slice:
		return true, appendValue(b, serieskey.Record, sliceValue(x))
	default: // other slices and maps (Split gives a []string): their JSON form
		if k := reflect.ValueOf(x).Kind(); k != reflect.Slice && k != reflect.Map {
			return false, false
		}
		raw, err := json.Marshal(x)
		if err != nil {
			return false, false
		}
		return true, appendValue(b, serieskey.Record, pcommon.NewValueStr(string(raw)))
	}
	return true, truncated
}

func mapValue(m pcommon.Map) pcommon.Value {
	v := pcommon.NewValueMap()
	m.CopyTo(v.Map())
	return v
}

func sliceValue(s pcommon.Slice) pcommon.Value {
	v := pcommon.NewValueSlice()
	s.CopyTo(v.Slice())
	return v
}

// computedNumber reads the value of a value expression: an int, a double, or a string holding a
// number; anything else means the record has no value.
func computedNumber(v any) (float64, valueReason) {
	switch x := v.(type) {
	case nil:
		return math.NaN(), valueMissing
	case int64:
		return float64(x), valueOK
	case float64:
		return finite(x)
	case string:
		return parseValue(x)
	case pcommon.Value:
		switch x.Type() {
		case pcommon.ValueTypeInt:
			return float64(x.Int()), valueOK
		case pcommon.ValueTypeDouble:
			return finite(x.Double())
		case pcommon.ValueTypeStr:
			return parseValue(x.Str())
		case pcommon.ValueTypeEmpty:
			return math.NaN(), valueMissing
		}
	}
	return math.NaN(), valueNotNumeric
}
