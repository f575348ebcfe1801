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
	// name is the configured name; a family (the percentiles) matches pattern instead, and the
	// metric is named as configured.
	name    string
	pattern *regexp.Regexp
	// needsValue: a value output, refused for an aggregation without a value.
	needsValue bool
	metric     metricShape
	// description of the metric. In a family's, its name (pNN) stands for the configured one.
	description string
	// value is a double output's value for a result; q is the output's index among the family's
	// configured members (the percentile's index in Result.Quantiles). count's is intValue; the
	// histogram's is the point's sketch or bucket counts.
	value    func(r *stream.Result, q int) float64
	intValue func(r *stream.Result) int64
	// ofWindowValues: a gauge of the values of the whole window, emitted for a window with at least
	// one value. The others are additive: they come from the result's point (see stream.Point), with
	// the configured temporality.
	ofWindowValues bool
	// windowMax: the gauge of the window's greatest value, which carries its exemplar (see
	// Result.MaxExemplar).
	windowMax bool
}

// metricShape is the pdata type of an output's metric.
type metricShape uint8

const (
	shapeCount     metricShape = iota // Sum of ints, monotonic; unit {span}, {log} or {value}
	shapeSum                          // Sum of doubles, monotonic for durations and increases; the aggregation's unit
	shapeGauge                        // Gauge of doubles; the aggregation's unit
	shapeHistogram                    // ExponentialHistogram, or Histogram with explicit buckets; the aggregation's unit
)

const additive = " (cumulative: since the series' start; delta: in the slide)."

// outputs is the table, in the order their metrics are made for a result.
var outputs = []Output{
	{name: Count, metric: shapeCount, description: "Records" + additive,
		intValue: func(r *stream.Result) int64 { return int64(min(r.Point.Count, math.MaxInt64)) }}, // saturated
	{name: "sum", needsValue: true, metric: shapeSum, description: "Sum of the values" + additive,
		value: func(r *stream.Result, _ int) float64 { return r.Point.Sum }},
	{name: "avg", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Mean of the values in the window.",
		value: func(r *stream.Result, _ int) float64 { return r.Avg }},
	{name: "min", needsValue: true, metric: shapeGauge, ofWindowValues: true, description: "Least value in the window.",
		value: func(r *stream.Result, _ int) float64 { return r.Min }},
	{name: Max, needsValue: true, metric: shapeGauge, ofWindowValues: true, windowMax: true, description: "Greatest value in the window.",
		value: func(r *stream.Result, _ int) float64 { return r.Max }},
	{name: "pNN", pattern: regexp.MustCompile(`^p([0-9]{1,6})$`), needsValue: true, metric: shapeGauge, ofWindowValues: true,
		description: "Percentile pNN of the values in the window, within 1% relative error.",
		value:       func(r *stream.Result, q int) float64 { return r.Quantiles[q] }},
	{name: Histogram, needsValue: true, metric: shapeHistogram, description: "Histogram of the values" + additive},
}

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
			names[i] = "p50"
		}
	}
	return names
}

// Names lists the table for an error message: count, sum, ..., pNN (p50, p99, p999), histogram.
func Names() string {
	names := make([]string, len(outputs))
	for i, o := range outputs {
		names[i] = o.name
		if o.pattern != nil {
			names[i] += " (p50, p99, p999)"
		}
	}
	return strings.Join(names, ", ")
}

// quantileOf returns the quantile a percentile output names: the digits after "0.", p999 = 0.999.
func quantileOf(name string) (float64, error) {
	return strconv.ParseFloat("0."+strings.TrimPrefix(name, "p"), 64)
}

// Compile returns an aggregation's configured outputs in table order (the percentiles in their
// configured order), and its quantiles.
func Compile(configured []string) ([]Emitted, []float64, error) {
	var out []Emitted
	var quantiles []float64
	for i := range outputs {
		def := &outputs[i]
		for _, name := range configured {
			if Lookup(name) != def {
				continue
			}
			e := Emitted{def: def, name: name}
			if def.pattern != nil {
				q, err := quantileOf(name)
				if err != nil {
					return nil, nil, fmt.Errorf("output %q: %w", name, err)
				}
				e.q = len(quantiles)
				quantiles = append(quantiles, q)
			}
			out = append(out, e)
		}
	}
	return out, quantiles, nil
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
	q    int    // index among the percentiles, for their value
}
