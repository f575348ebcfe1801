package windowaggregator

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/windowaggregator/windowaggregator/processor/serieskey"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// Special group-by and where keys that are fields of the record, not attributes.
const (
	fieldNone = iota
	fieldSpanName
	fieldSpanKind
	fieldStatusCode
	fieldSeverityText
)

var fieldKeys = map[string]int{
	"span.name": fieldSpanName, "span.kind": fieldSpanKind, "status.code": fieldStatusCode, "severity.text": fieldSeverityText,
}

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

var spanKindByConfig = map[string]ptrace.SpanKind{
	"unspecified": ptrace.SpanKindUnspecified, "internal": ptrace.SpanKindInternal, "server": ptrace.SpanKindServer,
	"client": ptrace.SpanKindClient, "producer": ptrace.SpanKindProducer, "consumer": ptrace.SpanKindConsumer,
}

// recordView is what an aggregation reads of one span or log record.
type recordView struct {
	attrs, scope, resource pcommon.Map
	spanName               string
	spanKind               ptrace.SpanKind
	status                 ptrace.StatusCode
	severityText           string

	// outer caches lookups in the scope and resource, which every record of a scope shares: a key
	// that records lack (service.name, say) is searched for there once per scope, not per record.
	outer []outerValue

	// traceState is the span's W3C tracestate, read when some aggregation weighs spans by their
	// adjusted count (shared.readTraceState); "": none, the span weighs 1.
	traceState string
	// The record itself (a span, or a log record), for what only weighing it reads: the adjusted
	// count of a span's tracestate, and the ids and times that round a fractional weight; read once
	// per record, when an aggregation first asks.
	span                ptrace.Span
	log                 plog.LogRecord
	adjusted            float64 // the span's adjusted count, once read
	adjustedWhy         weightReason
	hasAdjusted, seeded bool
	seed                uint64
}

type outerValue struct {
	key   string
	value pcommon.Value
	src   serieskey.Source
	found bool
}

// setScope points the view at a new scope and resource, forgetting the cached lookups.
func (r *recordView) setScope(scope, resource pcommon.Map) {
	r.scope, r.resource = scope, resource
	clear(r.outer)
	r.outer = r.outer[:0]
}

// setSpan points the view at span sp. The kind and the status are read only when asked for: the
// status lies in another cache line of the span (see shared.readKind).
func (r *recordView) setSpan(sp ptrace.Span, kind, status bool) {
	r.attrs, r.spanName = sp.Attributes(), sp.Name()
	if kind {
		r.spanKind = sp.Kind()
	}
	if status {
		r.status = sp.Status().Code()
	}
}

// weighSpan points what weighing reads at span sp, and reads its tracestate if traceState: for the
// aggregations that weigh spans (see shared.weighsSpans).
func (r *recordView) weighSpan(sp ptrace.Span, traceState bool) {
	r.span, r.hasAdjusted, r.seeded = sp, false, false
	if traceState {
		r.traceState = sp.TraceState().AsRaw()
	}
}

// setLog points the view at log record lr.
func (r *recordView) setLog(lr plog.LogRecord) {
	r.log, r.seeded = lr, false
	r.attrs, r.severityText = lr.Attributes(), lr.SeverityText()
}

// adjustedCount returns the span's adjusted count (see the package function), read once per span
// through the tracestates cache.
func (r *recordView) adjustedCount(c *traceStates) (float64, weightReason) {
	if !r.hasAdjusted {
		r.adjusted, r.adjustedWhy = c.adjustedCount(r.traceState)
		r.hasAdjusted = true
	}
	return r.adjusted, r.adjustedWhy
}

// weightSeed returns the record's weightSeed, drawn once per record.
func (r *recordView) weightSeed() uint64 {
	if !r.seeded {
		if r.log != (plog.LogRecord{}) {
			r.seed = weightSeed(r.log.TraceID(), r.log.SpanID(), r.log.Timestamp(), r.log.ObservedTimestamp())
		} else {
			r.seed = weightSeed(r.span.TraceID(), r.span.SpanID(), 0, 0)
		}
		r.seeded = true
	}
	return r.seed
}

// field returns a special key's value.
func (r *recordView) field(f int) string {
	switch f {
	case fieldSpanName:
		return r.spanName
	case fieldSpanKind:
		return enumName(spanKindNames[:], r.spanKind)
	case fieldStatusCode:
		return enumName(statusCodeNames[:], r.status)
	case fieldSeverityText:
		return r.severityText
	}
	return ""
}

// lookup finds an attribute on the record, then its scope, then its resource.
func (r *recordView) lookup(key string) (pcommon.Value, serieskey.Source, bool) {
	if v, ok := r.attrs.Get(key); ok {
		return v, serieskey.Record, true
	}
	for i := range r.outer {
		if o := &r.outer[i]; o.key == key {
			return o.value, o.src, o.found
		}
	}
	o := outerValue{key: key}
	if v, ok := r.scope.Get(key); ok {
		o.value, o.src, o.found = v, serieskey.Scope, true
	} else if v, ok := r.resource.Get(key); ok {
		o.value, o.src, o.found = v, serieskey.Resource, true
	}
	r.outer = append(r.outer, o)
	return o.value, o.src, o.found
}

// keyRef is a group-by or where key, resolved once.
type keyRef struct {
	name  string
	field int // fieldNone: an attribute
}

// fieldSignal returns the signal whose records have the special key name as a field, or "" for an
// attribute key.
func fieldSignal(name string) string {
	switch fieldKeys[name] {
	case fieldNone:
		return ""
	case fieldSeverityText:
		return signalLogs
	}
	return signalSpans
}

func newKeyRef(name, signal string) keyRef {
	f := fieldKeys[name]
	if fs := fieldSignal(name); fs != "" && fs != signal {
		f = fieldNone // a span field named on logs (or the reverse) is an ordinary attribute
	}
	return keyRef{name: name, field: f}
}

// condition is one where.attributes equality.
type condition struct {
	key  keyRef
	want pcommon.Value
}

func (c *condition) holds(r *recordView) bool {
	if c.key.field != fieldNone {
		return c.want.Type() == pcommon.ValueTypeStr && c.want.Str() == r.field(c.key.field)
	}
	got, _, ok := r.lookup(c.key.name)
	if !ok {
		return false
	}
	return valuesEqual(got, c.want)
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

// aggregation is one configured aggregation, compiled for the hot path.
type aggregation struct {
	index     int // in the engine
	name      string
	signal    string
	input     int   // inputSpans or inputLogs: which metrics outputs take its results
	spanKinds uint8 // bit per ptrace.SpanKind; 0: any
	where     []condition
	groupBy   []keyRef
	// stampsInstance: its output resources carry the outputs' service.instance.id (shared.instance;
	// it does not group by that key)
	stampsInstance bool
	// value
	duration  bool    // the span duration, divided by unitScale
	unitScale float64 // nanoseconds per unit
	unit      string
	valueKey  keyRef // the numeric attribute, when not duration
	hasValue  bool
	weight    weightKind
	weightKey keyRef    // the weight attribute, with weighAttribute
	outputs   []emitted // in table order (see outputs.go)
	quantiles []float64
	histMax   int       // buckets per sign of the exponential histogram output
	bounds    []float64 // the explicit histogram output's bucket bounds, in the value's unit; nil: exponential
	// exemplars kept per pane and point: max_per_data_point for the histogram's points, 1 for the
	// max gauge alone; 0: none
	exemplars int
}

func compileAggregation(index int, a AggregationConfig) (*aggregation, error) {
	c := &aggregation{index: index, name: a.Name, signal: a.Signal, input: inputSpans, histMax: defaultHistogramMaxSize}
	if a.Signal == signalLogs {
		c.input = inputLogs
	}
	if h := a.Histogram; h != nil && h.Exponential != nil && h.Exponential.MaxSize != 0 {
		c.histMax = h.Exponential.MaxSize
	}
	if a.Where != nil {
		for _, k := range a.Where.SpanKind {
			c.spanKinds |= 1 << spanKindByConfig[k]
		}
		for k, v := range a.Where.Attributes {
			want := pcommon.NewValueEmpty()
			if err := want.FromRaw(v); err != nil {
				return nil, fmt.Errorf("aggregation %q: where.attributes.%s: %w", a.Name, k, err)
			}
			c.where = append(c.where, condition{key: newKeyRef(k, a.Signal), want: want})
		}
	}
	for _, k := range a.GroupBy {
		c.groupBy = append(c.groupBy, newKeyRef(k, a.Signal))
	}
	c.stampsInstance = stampsInstance(c)
	switch {
	case a.isDuration():
		c.duration, c.hasValue = true, true
		c.unit = a.Unit
		if c.unit == "" {
			c.unit = "ms"
		}
		c.unitScale = unitScale[c.unit]
	case strings.HasPrefix(a.Value, valueAttributePrefix):
		c.valueKey = newKeyRef(strings.TrimPrefix(a.Value, valueAttributePrefix), a.Signal)
		c.hasValue = true
	}
	switch w := a.weight(); {
	case w == weightAdjustedCountName:
		c.weight = weighAdjustedCount
	case strings.HasPrefix(w, valueAttributePrefix):
		c.weight, c.weightKey = weighAttribute, newKeyRef(strings.TrimPrefix(w, valueAttributePrefix), a.Signal)
	}
	var err error
	if c.outputs, c.quantiles, err = compileOutputs(a.outputs()); err != nil {
		return nil, fmt.Errorf("aggregation %q: %w", a.Name, err)
	}
	if h := a.Histogram; h != nil && h.Explicit != nil {
		if c.bounds, err = a.bucketBounds(c.unitScale); err != nil {
			return nil, fmt.Errorf("aggregation %q: histogram.explicit.buckets: %w", a.Name, err)
		}
	}
	if c.exemplars = a.Exemplars.perPoint(); c.exemplars > 0 && !c.hasOutput(outputHistogram) {
		c.exemplars = 1 // the max gauge's alone
	}
	return c, nil
}

// readsSpanFields says whether the aggregation reads a span's kind and its status code.
func (c *aggregation) readsSpanFields() (kind, status bool) {
	return c.spanKinds != 0 || c.reads(fieldSpanKind), c.reads(fieldStatusCode)
}

// reads says whether the aggregation reads the special key f: to group by, to select, or as its value.
func (c *aggregation) reads(f int) bool {
	if (c.hasValue && !c.duration && c.valueKey.field == f) || (c.weight == weighAttribute && c.weightKey.field == f) {
		return true
	}
	for _, k := range c.groupBy {
		if k.field == f {
			return true
		}
	}
	for i := range c.where {
		if c.where[i].key.field == f {
			return true
		}
	}
	return false
}

// engineAggregation is what the engine keeps for this aggregation.
func (c *aggregation) engineAggregation(maxSeries int) stream.Aggregation {
	hist := c.hasOutput(outputHistogram)
	return stream.Aggregation{MaxSeries: maxSeries, Quantiles: c.quantiles, Histogram: hist && c.bounds == nil, Bounds: c.bounds,
		Exemplars: c.exemplars}
}

// matches applies the where clause.
func (c *aggregation) matches(r *recordView) bool {
	// spanKinds is set on span aggregations only (config refuses it on logs). A kind outside the enum
	// (OTLP carries any int32) shifts the bit out of the uint8: it matches no configured kind.
	if c.spanKinds != 0 && c.spanKinds&(1<<uint32(r.spanKind)) == 0 {
		return false
	}
	for i := range c.where {
		if !c.where[i].holds(r) {
			return false
		}
	}
	return true
}

// maxKeyValueLen bounds each string or bytes group-by value in a series key: longer values are cut
// to this many bytes (and counted), so that a flood of huge attribute values cannot exhaust memory.
const maxKeyValueLen = 4096

// buildKey writes the record's series key and reports whether it had to cut a value.
func (c *aggregation) buildKey(b *serieskey.Builder, r *recordView) (truncated bool) {
	b.Reset()
	for _, k := range c.groupBy {
		if k.field != fieldNone {
			b.Str(serieskey.Record, r.field(k.field))
			continue
		}
		v, src, ok := r.lookup(k.name)
		if !ok {
			b.Absent()
			continue
		}
		// Most group-by values are strings: Str is one type check, Type a switch over every type.
		if str := v.Str(); str != "" && len(str) <= maxKeyValueLen {
			b.Str(src, str)
			continue
		}
		switch v.Type() {
		case pcommon.ValueTypeStr:
			str := v.Str()
			if len(str) > maxKeyValueLen {
				str, truncated = cutUTF8(str, maxKeyValueLen), true
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
			if len(raw) > maxKeyValueLen {
				raw, truncated = raw[:maxKeyValueLen], true
			}
			b.Bytes(src, raw)
		case pcommon.ValueTypeEmpty:
			b.Absent()
		default: // maps and slices: their JSON form, as a string
			str := v.AsString()
			if len(str) > maxKeyValueLen {
				str, truncated = cutUTF8(str, maxKeyValueLen), true
			}
			b.Str(src, str)
		}
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

// Reasons a record has no value, by index; each name is a counter attribute.
type valueReason uint8

const (
	valueOK valueReason = iota
	valueMissing
	valueNotNumeric
	valueNotFinite
	valueEndBeforeStart
	valueNoStart
	numValueReasons
)

var valueReasonNames = [numValueReasons]string{
	valueMissing: "missing", valueNotNumeric: "not_numeric", valueNotFinite: "not_finite", valueEndBeforeStart: "end_before_start",
	valueNoStart: "no_start",
}

// value returns the record's value, or NaN and the reason there is none. start and end are the span's
// timestamps (0 for logs): a span without a start has no duration, however long since 1970 its end.
func (c *aggregation) value(r *recordView, start, end uint64) (float64, valueReason) {
	switch {
	case !c.hasValue:
		return math.NaN(), valueOK
	case !c.duration:
		return number(r, c.valueKey)
	case start == 0:
		return math.NaN(), valueNoStart
	case end < start:
		return math.NaN(), valueEndBeforeStart
	}
	return float64(end-start) / c.unitScale, valueOK
}

// weighsOne reports, without a call, that the record weighs 1 for the aggregation: it weighs none,
// or it is a span without a tracestate (the most common case of the default, adjusted_count).
func (c *aggregation) weighsOne(r *recordView) bool {
	return c.weight == weighNone || (c.weight == weighAdjustedCount && r.traceState == "")
}

// weigh returns the weight of the record for the aggregation, and why it is not the configured one
// (weightOK if it is). A weight of 0 (a weight below 1, rounded down) means the record stands for no
// record of the aggregation.
func (c *aggregation) weigh(r *recordView, ts *traceStates) (uint32, weightReason) {
	var w float64
	var why weightReason
	switch c.weight {
	case weighNone:
		return 1, weightOK
	case weighAdjustedCount:
		w, why = r.adjustedCount(ts)
	default:
		w, why = positiveWeight(number(r, c.weightKey))
	}
	if w == 1 { // unsampled, or a weight that could not be read: no rounding
		return 1, why
	}
	return roundWeight(w, r.weightSeed)
}

// number reads key k of the record as a number: an int, a double, or a string holding one; else NaN
// and the reason.
func number(r *recordView, k keyRef) (float64, valueReason) {
	if k.field != fieldNone { // a record field such as severity.text, read as a number
		return parseValue(r.field(k.field))
	}
	v, _, ok := r.lookup(k.name)
	if !ok {
		return math.NaN(), valueMissing
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
		return math.NaN(), valueNotNumeric
	}
	return finite(f)
}

// parseValue reads a number written in a string.
func parseValue(str string) (float64, valueReason) {
	f, err := strconv.ParseFloat(strings.TrimSpace(str), 64)
	if err != nil {
		return math.NaN(), valueNotNumeric
	}
	return finite(f)
}

func finite(f float64) (float64, valueReason) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return math.NaN(), valueNotFinite
	}
	return f, valueOK
}
