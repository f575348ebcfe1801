package ingest

import (
	"context"
	"fmt"
	"sync"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl/ottlfuncs"
	"go.opentelemetry.io/collector/component"
	"go.uber.org/zap"
)

// An aggregation's OTTL (contrib's pkg/ottl, with path context names): where.conditions, computed
// group_by keys and a value expression. Each signal's file parses them for its transform context
// (ottlspan, ottllog) and evaluates them against the record the view holds.

// OTTLCondition is a parsed condition, and OTTLValue a parsed value expression, of the view's record.
type (
	OTTLCondition func(ctx context.Context, r *Record) (bool, error)
	OTTLValue     func(ctx context.Context, r *Record) (any, error)
)

// OTTLParser parses one signal's OTTL; parse errors are the parser's own, which name the position
// and the reason (a path its context lacks, a function it does not know).
type OTTLParser interface {
	Condition(expr string) (OTTLCondition, error)
	Value(expr string) (OTTLValue, error)
}

// contextParser is a signal's OTTLParser: its parser for its transform context K, evaluated against
// the context of the view's record (recordSource.ottlContext).
type contextParser[K any] struct{ p ottl.Parser[K] }

func (o *contextParser[K]) Condition(expr string) (OTTLCondition, error) {
	c, err := o.p.ParseCondition(expr)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r *Record) (bool, error) { return c.Eval(ctx, r.src.ottlContext().(K)) }, nil
}

func (o *contextParser[K]) Value(expr string) (OTTLValue, error) {
	e, err := o.p.ParseValueExpression(expr)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, r *Record) (any, error) { return e.Eval(ctx, r.src.ottlContext().(K)) }, nil
}

// parserOf returns the constructor of a signal's OTTL parser: newParser of its context package, with
// path context names (span., log., datapoint., resource., scope.) and the standard converters.
func parserOf[K any, O any](newParser func(map[string]ottl.Factory[K], component.TelemetrySettings, ...O) (ottl.Parser[K], error),
	pathContextNames func() O) func(component.TelemetrySettings) (OTTLParser, error) {
	return func(set component.TelemetrySettings) (OTTLParser, error) {
		p, err := newParser(ottlfuncs.StandardConverters[K](), set, pathContextNames())
		return &contextParser[K]{p: p}, err
	}
}

// ValidationSettings are the telemetry settings OTTL is parsed with when a configuration is
// validated: the parser only logs.
var ValidationSettings = component.TelemetrySettings{Logger: zap.NewNop()}

// The clauses an OTTL error is counted under.
type ottlClause uint8

const (
	ClauseWhere ottlClause = iota
	ClauseGroupBy
	ClauseValue
	NumOTTLClauses
)

var OTTLClauseNames = [NumOTTLClauses]string{ClauseWhere: "where", ClauseGroupBy: "group_by", ClauseValue: "value"}

// ottlFailure is the OTTL errors of one aggregation and clause in one ingest call, with the last.
type ottlFailure struct {
	Agg    int
	Clause ottlClause
	N      int64
	Last   error
}

// ottlErrors are the OTTL errors of one ingest call: by aggregation and clause, to be counted, and with
// error_mode propagate the first, which the call returns.
type ottlErrors struct {
	propagate bool
	first     error
	failures  []ottlFailure
}

// add records an OTTL error of aggregation agg, named name, on the record being read. The record goes on as ignore says (the
// condition false, the key or the value missing).
func (e *ottlErrors) add(agg int, name string, clause ottlClause, err error) {
	if e.first == nil && e.propagate {
		e.first = fmt.Errorf("aggregation %q: %s: %w", name, OTTLClauseNames[clause], err)
	}
	fs := e.failures
	for i := range fs {
		if fs[i].Agg == agg && fs[i].Clause == clause {
			fs[i].N++
			fs[i].Last = err
			return
		}
	}
	e.failures = append(fs, ottlFailure{Agg: agg, Clause: clause, N: 1, Last: err})
}

// reset empties e for another call, keeping its buffer.
func (e *ottlErrors) reset() {
	clear(e.failures)
	*e = ottlErrors{failures: e.failures[:0]}
}

// OTTLParsers parse each OTTL expression once: Validate parses the configuration's (with
// ValidationSettings), and the component compiles its aggregations with what it parsed (see the
// component's Config.parsers). Each signal's parser is made on first use, and hands out again what it parsed for
// the same text: a parsed expression keeps no state between evaluations.
type OTTLParsers struct {
	set      component.TelemetrySettings
	mu       sync.Mutex
	BySignal map[string]*onceParser
}

func NewOTTLParsers(set component.TelemetrySettings) *OTTLParsers {
	return &OTTLParsers{set: set, BySignal: map[string]*onceParser{}}
}

// Parser returns the parser of the OTTL of the signal named sg, which newParser makes.
func (ps *OTTLParsers) Parser(sg string, newParser func(component.TelemetrySettings) (OTTLParser, error)) (OTTLParser, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p, ok := ps.BySignal[sg]; ok {
		return p, nil
	}
	p, err := newParser(ps.set)
	if err != nil {
		return nil, err
	}
	op := &onceParser{Parser: p, Conditions: map[string]OTTLCondition{}, Values: map[string]OTTLValue{}}
	ps.BySignal[sg] = op
	return op, nil
}

// onceParser is an OTTLParser that parses a text once.
type onceParser struct {
	Parser     OTTLParser
	mu         sync.Mutex
	Conditions map[string]OTTLCondition
	Values     map[string]OTTLValue
}

func (o *onceParser) Condition(expr string) (OTTLCondition, error) {
	return parseOnce(&o.mu, o.Conditions, expr, o.Parser.Condition)
}

func (o *onceParser) Value(expr string) (OTTLValue, error) {
	return parseOnce(&o.mu, o.Values, expr, o.Parser.Value)
}

// parseOnce returns what parse made of expr, parsing it on first use; an expression that does not
// parse is parsed again, and fails again.
func parseOnce[T any](mu *sync.Mutex, parsed map[string]T, expr string, parse func(string) (T, error)) (T, error) {
	mu.Lock()
	defer mu.Unlock()
	if v, ok := parsed[expr]; ok {
		return v, nil
	}
	v, err := parse(expr)
	if err == nil {
		parsed[expr] = v
	}
	return v, err
}
