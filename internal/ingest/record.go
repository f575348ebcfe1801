package ingest

import (
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/engine/serieskey"
)

// maxFields bounds a signal's special keys (signal.fields).
const maxFields = 4

// Record is the view of one record (a span, a log record) that the aggregations read, whatever its
// signal: its attributes, its scope's and its resource's, the values of its signal's special keys, and
// what only some aggregations read (a duration, a weight). The signal's file fills it Record by Record
// with what the aggregations of the component read (SignalAggs), and nothing else.
type Record struct {
	Attrs, scope, resource pcommon.Map

	// Field holds the values of the signal's special keys that some aggregation reads, by index in
	// signal.fields; kind is the record's kind (a span's), for where.span_kind.
	Field [maxFields]string
	kind  int32

	// start and end are a span's timestamps, for value: duration.
	start, end uint64

	// traceState is the span's W3C tracestate, for weight: adjusted_count; "": none, it weighs 1.
	traceState string
	// The adjusted count of traceState and the draw that rounds a fractional weight, read once per
	// record when an aggregation first asks; src is the signal's reader, which draws it.
	adjusted            float64
	adjustedWhy         weightReason
	hasAdjusted, seeded bool
	seed                uint64
	src                 recordSource

	// outer caches lookups in the scope and resource, which every record of a scope shares: a key
	// that records lack (service.name, say) is searched for there once per scope, not per record.
	outer []outerValue
}

// recordSource is the signal's reader of the record a view holds, for what is read only when an
// aggregation asks: the draw that rounds a fractional weight (weightSeed of the record's identity),
// the record's OTTL transform context (of the signal's OTTL context package), made on first use, and
// with dedup its identity.
type recordSource interface {
	weightSeed() uint64
	ottlContext() any
	// identity is the record's identity for dedup; ok is false for a record that has none.
	identity() (id dedup.ID, ok bool)
}

// transformContext is a reader's OTTL transform context K of the record it holds: made when an
// expression first asks (get), closed when the view moves on (close).
type transformContext[K interface{ Close() }] struct {
	tctx K
	made bool
}

// get returns the context, made by make on first use.
func (c *transformContext[K]) get(make func() K) K {
	if !c.made {
		c.tctx, c.made = make(), true
	}
	return c.tctx
}

// close closes the context, if it was made.
func (c *transformContext[K]) close() {
	if c.made {
		c.tctx.Close()
		var none K
		c.tctx, c.made = none, false
	}
}

type outerValue struct {
	key   string
	value pcommon.Value
	src   serieskey.Source
	found bool
}

// setScope points the view at a new scope and resource, forgetting the cached lookups.
func (r *Record) setScope(scope, resource pcommon.Map) {
	r.scope, r.resource = scope, resource
	clear(r.outer)
	r.outer = r.outer[:0]
}

// next readies the view for another record, whose attributes are attrs: what is read once per record
// is to be read again.
func (r *Record) next(attrs pcommon.Map) {
	r.Attrs, r.hasAdjusted, r.seeded = attrs, false, false
}

// clear drops the view's references to a batch's data, for the pool.
func (r *Record) clear() {
	r.setScope(pcommon.Map{}, pcommon.Map{})
	r.Attrs, r.traceState, r.Field = pcommon.Map{}, "", [maxFields]string{}
}

// lookup finds an attribute on the record, then its scope, then its resource.
func (r *Record) lookup(key string) (pcommon.Value, serieskey.Source, bool) {
	if v, ok := r.Attrs.Get(key); ok {
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

// adjustedCount returns the adjusted count of the span's tracestate (see the package function), read
// once per span through the tracestates cache.
func (r *Record) adjustedCount(c *traceStates) (float64, weightReason) {
	if !r.hasAdjusted {
		r.adjusted, r.adjustedWhy = c.adjustedCount(r.traceState)
		r.hasAdjusted = true
	}
	return r.adjusted, r.adjustedWhy
}

// weightSeed returns the record's weightSeed, drawn once per record.
func (r *Record) weightSeed() uint64 {
	if !r.seeded {
		r.seed, r.seeded = r.src.weightSeed(), true
	}
	return r.seed
}

// timeOf converts a pdata timestamp to the engine's int64. Anything past 2^62 ns (the year 2116) is
// beyond the engine's range, which rejects it as future.
func timeOf(ts uint64) int64 {
	if ts > 1<<62 {
		return 1 << 62
	}
	return int64(ts)
}
