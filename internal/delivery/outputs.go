package delivery

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// Output is one row of the table of outputs: what an aggregation's `outputs` entry emits. Adding an
// output is a row here and its case in the component's test of every row.
type Output struct {
	// name is the configured name; a family (the percentiles, distinct values) matches pattern
	// instead, and examples are some of its members, the first standing for the family.
	name     string
	pattern  *regexp.Regexp
	examples []string
	// needsValue: a value output, refused for an aggregation without a value.
	needsValue bool
	metric     metricShape
	// description of the metric. In a family's, its name (pNN) stands for the configured one.
	description string
	// value is a double output's value for a result; q is the output's index among the family's
	// configured members (the percentile's index in Result.Quantiles). count's is intValue; the
	// histogram's is the point's sketch or bucket counts.
	value    func(r *stream.Result, e *Emitted) float64
	intValue func(r *stream.Result, e *Emitted) int64
	// ofWindowValues: a gauge of the values of the whole window, emitted for a window with at least
	// one value. The others are additive: they come from the result's point (see stream.Point), with
	// the configured temporality.
	ofWindowValues bool
	// windowMax: the gauge of the window's greatest value, which carries its exemplar (see
	// Result.MaxExemplar).
	windowMax bool
	// ofWindow: a gauge of the whole window, emitted at every firing of one, whether or not it has
	// values (distinct, rate).
	ofWindow bool
	// accumulator, for an output whose state the engine keeps in an accumulator of its own (see
	// stream.Accumulator), makes its kind; id is the index of the record identifier it takes, for an
	// output of a key (distinct). Its value reads Result.Values at the configured output's index.
	accumulator func(id int) stream.AccumulatorKind
	// unit is its metric's unit, from the aggregation's (see describe).
	unit unitRule
}

// metricShape is the pdata type of an output's metric.
type metricShape uint8

const (
	shapeCount     metricShape = iota // Sum of ints, monotonic; unit {span}, {log} or {value}
	shapeSum                          // Sum of doubles, monotonic for durations and increases; the aggregation's unit
	shapeGauge                        // Gauge of doubles; the aggregation's unit
	shapeHistogram                    // ExponentialHistogram, or Histogram with explicit buckets; the aggregation's unit
	shapeIntGauge                     // Gauge of ints
)

// unitRule is how an output's unit follows from its aggregation's.
type unitRule uint8

const (
	unitAsValues  unitRule = iota // the aggregation's (count's: its records', see describe)
	unitSquared                   // the aggregation's squared: ms2
	unitPerSecond                 // per second: {span}/s for a count, the input's unit/s for a sum
	unitValues                    // {value}: a number of distinct values
)

const additive = " (cumulative: since the series' start; delta: in the slide)."

// outputs is the table, in the order their metrics are made for a result.
var outputs = []Output{
	{name: Count, metric: shapeCount, description: "Records" + additive,
		intValue: func(r *stream.Result, _ *Emitted) int64 { return int64(min(r.Point.Count, math.MaxInt64)) }}, // saturated
	{name: "sum", needsValue: true, metric: shapeSum, description: "Sum of the values" + additive,
		value: func(r *stream.Result, _ *Emitted) float64 { return r.Point.Sum }},
	{name: "avg", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Mean of the values in the window.",
		value: func(r *stream.Result, _ *Emitted) float64 { return r.Avg }},
	{name: "min", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Least value in the window.",
		value: func(r *stream.Result, _ *Emitted) float64 { return r.Min }},
	{name: Max, needsValue: true, metric: shapeGauge, ofWindowValues: true, windowMax: true, description: "Greatest value in the window.",
		value: func(r *stream.Result, _ *Emitted) float64 { return r.Max }},
	{name: "pNN", pattern: regexp.MustCompile(`^p([0-9]{1,6})$`), examples: []string{"p50", "p99", "p999"}, needsValue: true, metric: shapeGauge, ofWindowValues: true,
		description: "Percentile pNN of the values in the window, within 1% relative error.",
		value:       func(r *stream.Result, e *Emitted) float64 { return r.Quantiles[e.q] }},
	{name: Histogram, needsValue: true, metric: shapeHistogram, description: "Histogram of the values" + additive},
	{name: "stddev", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Population standard deviation of the values in the window.",
		accumulator: spread, value: func(r *stream.Result, e *Emitted) float64 { return math.Sqrt(r.Values[e.q]) }},
	{name: "stdvar", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Population variance of the values in the window.",
		accumulator: spread, value: func(r *stream.Result, e *Emitted) float64 { return r.Values[e.q] },
		unit: unitSquared},
	{name: "rate", metric: shapeGauge, ofWindow: true, description: "Records per second of the window (metric points: their sum per second).",
		value: func(r *stream.Result, e *Emitted) float64 {
			if r.WindowCount == 0 {
				return math.NaN() // unknown: a late firing restored from a snapshot of version 6
			}
			seconds := float64(r.End-r.Start) / 1e9
			if e.ofSum {
				return r.WindowSum / seconds
			}
			return float64(r.WindowCount) / seconds
		},
		unit: unitPerSecond},
	{name: "distinct:<key>", pattern: regexp.MustCompile(`^` + distinctPrefix + `.+$`), examples: []string{"distinct:trace_id", "distinct:user.id"}, metric: shapeIntGauge, ofWindow: true,
		description: "Distinct values of <key> in the window (exact up to 64, within 1% typically above).",
		accumulator: stream.DistinctKind, intValue: func(r *stream.Result, e *Emitted) int64 { return int64(math.Round(r.Values[e.q])) }, unit: unitValues},
}

// distinctPrefix begins a distinct:<key> output; the key follows it.
const distinctPrefix = "distinct:"

// DistinctKey returns the key of a distinct:<key> output name; ok is false for another output.
func DistinctKey(name string) (key string, ok bool) {
	key, ok = strings.CutPrefix(name, distinctPrefix)
	return key, ok && key != ""
}

// spread is the kind of the stddev and stdvar outputs' accumulator.
func spread(int) stream.AccumulatorKind { return stream.SpreadKind }

// The rows that the configuration names by themselves.
const (
	Count     = "count"
	Histogram = "histogram"
	Max       = "max"
)

// Lookup returns the row of a configured output name, or nil.
func Lookup(name string) *Output {
	for i := range outputs {
		o := &outputs[i]
		if o.name == name || o.pattern != nil && o.pattern.MatchString(name) {
			return o
		}
	}
	return nil
}

// NeedsValue reports whether the output is of the records' values: an aggregation without a value
// cannot have it.
func (o *Output) NeedsValue() bool { return o.needsValue }

// Rows lists the table's names, a family's as one of its members (p50): one configured output for
// every row.
func Rows() []string {
	names := make([]string, len(outputs))
	for i, o := range outputs {
		names[i] = o.name
		if o.pattern != nil {
			names[i] = o.examples[0]
		}
	}
	return names
}

// Names lists the table for an error message: count, sum, ..., pNN (p50, p99, p999), histogram, ....
func Names() string {
	names := make([]string, len(outputs))
	for i, o := range outputs {
		names[i] = o.name
		if o.pattern != nil {
			names[i] += " (" + strings.Join(o.examples, ", ") + ")"
		}
	}
	return strings.Join(names, ", ")
}

// quantileOf returns the quantile a percentile output names: the digits after "0.", p999 = 0.999.
func quantileOf(name string) (float64, error) {
	return strconv.ParseFloat("0."+strings.TrimPrefix(name, "p"), 64)
}

// Compiled is an aggregation's configured outputs, and what the engine keeps for them.
type Compiled struct {
	// Outputs are in table order, a family's members in their configured order.
	Outputs []Emitted
	// Quantiles are the percentiles', in their order.
	Quantiles []float64
	// Accumulators are the kinds of the outputs that keep one (see stream.Accumulator), in their
	// order; Keys are the keys of those that take a record identifier (distinct), by its index.
	Accumulators []stream.AccumulatorKind
	Keys         []string
}

// Compile returns an aggregation's configured outputs in table order (a family's in their configured
// order), its quantiles, and its accumulators; ofSum says that its rate is its sum's, per second
// (metric points), not its count's.
func Compile(configured []string, ofSum bool) (Compiled, error) {
	var c Compiled
	for i := range outputs {
		def := &outputs[i]
		for _, name := range configured {
			if Lookup(name) != def {
				continue
			}
			e := Emitted{def: def, name: name, ofSum: ofSum && def.unit == unitPerSecond}
			if def.name == "pNN" {
				q, err := quantileOf(name)
				if err != nil {
					return Compiled{}, fmt.Errorf("output %q: %w", name, err)
				}
				e.q = len(c.Quantiles)
				c.Quantiles = append(c.Quantiles, q)
			}
			if def.accumulator != nil {
				id := -1
				if key, ok := strings.CutPrefix(name, distinctPrefix); ok {
					id = len(c.Keys)
					c.Keys = append(c.Keys, key)
					e.name = "distinct." + key // a metric name: <name>.distinct.<key>
				}
				e.q = len(c.Accumulators)
				c.Accumulators = append(c.Accumulators, def.accumulator(id))
			}
			c.Outputs = append(c.Outputs, e)
		}
	}
	return c, nil
}

// gauge returns output e's value in firing r, for an output that is a gauge of the whole window
// (ofWindowValues, ofWindow), and whether r has one: r fires a window, which has values for a gauge
// of its values, and the value is finite (the min or max of histograms that did not say theirs, the
// percentiles of histograms whose buckets no sketch takes, have none).
func (e *Emitted) gauge(r *stream.Result) (float64, bool) {
	if !r.HasWindow || e.def.ofWindowValues && r.WindowValueCount == 0 {
		return 0, false
	}
	if e.def.metric == shapeIntGauge {
		return float64(e.def.intValue(r, e)), true
	}
	v := e.def.value(r, e)
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// Has reports whether outputs hold the row named name.
func Has(outputs []Emitted, name string) bool {
	for _, e := range outputs {
		if e.def.name == name {
			return true
		}
	}
	return false
}

// Emitted is one configured output of an aggregation.
type Emitted struct {
	def  *Output
	name string // the metric name's suffix: the configured name
	q    int    // index among the percentiles, or among the accumulators (Result.Values), for its value
	// ofSum: a rate of the sum (metric points), not of the count
	ofSum bool
}
