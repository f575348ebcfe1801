package ingest

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
	"github.com/windowaggregator/windowaggregator/internal/values"
)

// What an aggregation reads of a record, through the view (record.go): whether it selects it, its
// series key, its value and its weight; as configured, or computed by OTTL, side by side.

// reading is what reading a record needs besides its view: the call's context, the builder of the
// series key, and where OTTL errors go.
type reading struct {
	ctx  context.Context
	r    *Record
	key  *serieskey.Builder
	errs *ottlErrors
}

func (c *Condition) holds(r *Record) bool {
	if c.Key.Field >= 0 {
		return c.Want.Type() == pcommon.ValueTypeStr && c.Want.Str() == r.Field[c.Key.Field]
	}
	got, _, ok := r.lookup(c.Key.Name)
	if !ok {
		return false
	}
	return valuesEqual(got, c.Want)
}

// valuesEqual compares a record's value with a configured one: same type and value, numbers across
// int and double by value, and otherwise by their string forms (so "200" matches the int 200).
func valuesEqual(got, want pcommon.Value) bool {
	switch {
	case got.Type() == want.Type():
		return got.Equal(want)
	case isNumber(got) && isNumber(want):
		return asFloat(got) == asFloat(want)
	}
	return got.AsString() == want.AsString()
}

func isNumber(v pcommon.Value) bool {
	return v.Type() == pcommon.ValueTypeInt || v.Type() == pcommon.ValueTypeDouble
}

func asFloat(v pcommon.Value) float64 {
	if v.Type() == pcommon.ValueTypeInt {
		return float64(v.Int())
	}
	return v.Double()
}

// matches applies the where clause.
func (c *Aggregation) matches(r *Record) bool {
	// kinds is set on span aggregations only (config refuses it elsewhere). A kind outside the enum
	// (OTLP carries any int32) shifts the bit out of the uint8: it matches no configured kind.
	if c.Kinds != 0 && c.Kinds&(1<<uint32(r.kind)) == 0 {
		return false
	}
	for i := range c.Where {
		if !c.Where[i].holds(r) {
			return false
		}
	}
	return true
}

// readComputed reads what an aggregation with OTTL or defaults reads of the view's record: whether its
// conditions select it (any one true), and if so its value and its series key (into rg.key). An OTTL
// error counts as the condition false, the key or the value missing (see ottlErrors).
func (rg *reading) readComputed(a *Aggregation) (v float64, why values.Reason, truncated, selected bool) {
	r := rg.r
	if len(a.Conditions) > 0 && !rg.anyCondition(a) {
		return 0, values.OK, false, false
	}
	if a.ValueExpr != nil {
		x, err := a.ValueExpr(rg.ctx, r)
		if err != nil {
			rg.errs.add(a.Index, a.Name, ClauseValue, err)
			x = nil
		}
		v, why = computedNumber(x)
	} else {
		v, why = a.value(r)
	}
	return v, why, rg.buildComputedKey(a), true
}

// anyCondition reports whether one of the aggregation's conditions holds for the view's record.
func (rg *reading) anyCondition(a *Aggregation) bool {
	for _, cond := range a.Conditions {
		ok, err := cond(rg.ctx, rg.r)
		if err != nil {
			rg.errs.add(a.Index, a.Name, ClauseWhere, err)
			continue
		}
		if ok {
			return true
		}
	}
	return false
}

// buildComputedKey is buildKey for keys computed by OTTL or with defaults: a value the record lacks
// (an expression giving nil, or failing) takes the key's default, if it has one, else it is absent.
func (rg *reading) buildComputedKey(a *Aggregation) (truncated bool) {
	b, r := rg.key, rg.r
	b.Reset()
	for i := range a.GroupBy {
		k, ck := &a.GroupBy[i], &a.ComputedKeys[i]
		switch {
		case ck.Expr != nil:
			x, err := ck.Expr(rg.ctx, r)
			if err != nil {
				rg.errs.add(a.Index, a.Name, ClauseGroupBy, err)
				x = nil
			}
			ok, cut := appendComputed(b, x)
			if ok {
				truncated = truncated || cut
				continue
			}
		case k.Field >= 0:
			b.Str(serieskey.Record, r.Field[k.Field])
			continue
		default:
			if v, src, ok := r.lookup(k.Name); ok {
				truncated = appendValue(b, src, v) || truncated
				continue
			}
		}
		if ck.HasDef {
			appendValue(b, serieskey.Record, ck.Def)
		} else {
			b.Absent()
		}
	}
	return truncated
}

// MaxKeyValueLen bounds each string or bytes group-by value in a series key: longer values are cut
// to this many bytes (and counted), so that a flood of huge attribute values cannot exhaust memory.
const MaxKeyValueLen = 4096

// BuildKey writes the record's series key and reports whether it had to cut a value.
func (c *Aggregation) BuildKey(b *serieskey.Builder, r *Record) (truncated bool) {
	b.Reset()
	for _, k := range c.GroupBy {
		if k.Field >= 0 {
			b.Str(serieskey.Record, r.Field[k.Field])
			continue
		}
		v, src, ok := r.lookup(k.Name)
		if !ok {
			b.Absent()
			continue
		}
		// Most group-by values are strings: Str is one type check, Type a switch over every type.
		if str := v.Str(); str != "" && len(str) <= MaxKeyValueLen {
			b.Str(src, str)
			continue
		}
		truncated = appendValue(b, src, v) || truncated
	}
	return truncated
}

// appendValue appends a group-by value of any type to the key (maps and slices as their JSON form),
// and reports whether it had to cut it.
func appendValue(b *serieskey.Builder, src serieskey.Source, v pcommon.Value) (truncated bool) {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		str := v.Str()
		if len(str) > MaxKeyValueLen {
			str, truncated = cutUTF8(str, MaxKeyValueLen), true
		}
		b.Str(src, str)
	case pcommon.ValueTypeInt:
		b.Int(src, v.Int())
	case pcommon.ValueTypeDouble:
		b.Double(src, v.Double())
	case pcommon.ValueTypeBool:
		b.Bool(src, v.Bool())
	case pcommon.ValueTypeBytes:
		raw := v.Bytes().AsRaw()
		if len(raw) > MaxKeyValueLen {
			raw, truncated = raw[:MaxKeyValueLen], true
		}
		b.Bytes(src, raw)
	case pcommon.ValueTypeEmpty:
		b.Absent()
	default: // maps and slices: their JSON form, as a string
		str := v.AsString()
		if len(str) > MaxKeyValueLen {
			str, truncated = cutUTF8(str, MaxKeyValueLen), true
		}
		b.Str(src, str)
	}
	return truncated
}

// cutUTF8 cuts s to at most n bytes without splitting a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// value returns the record's value, or NaN and the reason there is none. A span without a start has
// no duration, however long since 1970 its end.
func (c *Aggregation) value(r *Record) (float64, values.Reason) {
	switch {
	case !c.HasValue:
		return math.NaN(), values.OK
	case !c.Duration:
		return number(r, c.ValueKey)
	case r.start == 0:
		return math.NaN(), values.NoStart
	case r.end < r.start:
		return math.NaN(), values.EndBeforeStart
	}
	return float64(r.end-r.start) / c.UnitScale, values.OK
}

// weighsOne reports, without a call, that the record weighs 1 for the aggregation: it weighs none,
// or it is a span without a tracestate (the most common case of the default, adjusted_count).
func (c *Aggregation) weighsOne(r *Record) bool {
	return c.Weight == WeighNone || (c.Weight == WeighAdjustedCount && r.traceState == "")
}

// weigh returns the weight of the record for the aggregation, and why it is not the configured one
// (weightOK if it is). A weight of 0 (a weight below 1, rounded down) means the record stands for no
// record of the aggregation.
func (c *Aggregation) weigh(r *Record, ts *traceStates) (uint32, weightReason) {
	var w float64
	var why weightReason
	switch c.Weight {
	case WeighNone:
		return 1, WeightOK
	case WeighAdjustedCount:
		w, why = r.adjustedCount(ts)
	default:
		w, why = positiveWeight(number(r, c.WeightKey))
	}
	if w == 1 { // unsampled, or a weight that could not be read: no rounding
		return 1, why
	}
	return roundWeight(w, r.weightSeed)
}

// weightOfValue is the weight reason of a value that could not be read as a number.
var weightOfValue = [values.NumReasons]weightReason{
	values.Missing: weightMissing, values.NotNumeric: weightNotNumeric, values.NotFinite: weightNotFinite,
}

// positiveWeight checks a weight read from an attribute: a finite number above 0.
func positiveWeight(w float64, why values.Reason) (float64, weightReason) {
	switch {
	case why != values.OK:
		return 1, weightOfValue[why]
	case w <= 0:
		return 1, weightNotPositive
	}
	return w, WeightOK
}

// number reads key k of the record as a number: an int, a double, or a string holding one; else NaN
// and the reason.
func number(r *Record, k KeyRef) (float64, values.Reason) {
	if k.Field >= 0 { // a record field such as severity.text, read as a number
		return parseValue(r.Field[k.Field])
	}
	v, _, ok := r.lookup(k.Name)
	if !ok {
		return math.NaN(), values.Missing
	}
	var f float64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		f = float64(v.Int())
	case pcommon.ValueTypeDouble:
		f = v.Double()
	case pcommon.ValueTypeStr:
		return parseValue(v.Str())
	default:
		return math.NaN(), values.NotNumeric
	}
	return values.Finite(f)
}

// parseValue reads a number written in a string.
func parseValue(str string) (float64, values.Reason) {
	f, err := strconv.ParseFloat(strings.TrimSpace(str), 64)
	if err != nil {
		return math.NaN(), values.NotNumeric
	}
	return values.Finite(f)
}

// appendComputed appends the value v of a computed group_by key to the key: strings, ints, doubles,
// bools and bytes as they are, maps and slices as their JSON form. ok is false for nil (the record
// lacks the key) and for a value of no such type.
func appendComputed(b *serieskey.Builder, v any) (ok, truncated bool) {
	switch x := v.(type) {
	case nil:
		return false, false
	case string:
		if len(x) > MaxKeyValueLen {
			x, truncated = cutUTF8(x, MaxKeyValueLen), true
		}
		b.Str(serieskey.Record, x)
	case int64:
		b.Int(serieskey.Record, x)
	case float64:
		b.Double(serieskey.Record, x)
	case bool:
		b.Bool(serieskey.Record, x)
	case []byte:
		if len(x) > MaxKeyValueLen {
			x, truncated = x[:MaxKeyValueLen], true
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
func computedNumber(v any) (float64, values.Reason) {
	switch x := v.(type) {
	case nil:
		return math.NaN(), values.Missing
	case int64:
		return float64(x), values.OK
	case float64:
		return values.Finite(x)
	case string:
		return parseValue(x)
	case pcommon.Value:
		switch x.Type() {
		case pcommon.ValueTypeInt:
			return float64(x.Int()), values.OK
		case pcommon.ValueTypeDouble:
			return values.Finite(x.Double())
		case pcommon.ValueTypeStr:
			return parseValue(x.Str())
		case pcommon.ValueTypeEmpty:
			return math.NaN(), values.Missing
		}
	}
	return math.NaN(), values.NotNumeric
}
