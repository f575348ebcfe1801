package main

import (
	"regexp"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
)

// point is one data point of the component's results, as windowprint reads it: the metric
// <aggregation>.<output>, its attributes (the series) and its window.
type point struct {
	agg, output string  // http.server.duration and p99, of http.server.duration.p99
	series      string  // the point's attributes (the group_by values), key=value in their order
	win         window  // StartTimestamp and Timestamp: the window, or for delta sums the slide
	value       float64 // for a histogram, its count of values
	gauge       bool    // of the whole window: avg, min, max, pNN, stddev, rate, distinct
	unit        string
}

// percentile matches a pNN output, to order the percentiles on a line: p50, p99, p999.
var percentile = regexp.MustCompile(`^p[0-9]{1,6}$`)

// splitName splits a metric name into the aggregation's name and the output's: the last dotted part
// when it names an output of the component's table (count, sum, avg, pNN, ...), or distinct.<key>
// from the first ".distinct.". A name of no known output is an aggregation's whole, with the output
// "value".
func splitName(name string) (agg, output string) {
	if i := strings.Index(name, ".distinct."); i > 0 && i+len(".distinct.") < len(name) {
		return name[:i], name[i+1:]
	}
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if out := name[i+1:]; delivery.Lookup(out) != nil {
			return name[:i], out
		}
	}
	return name, "value"
}

// fixedRanks are outputRank's places of the outputs of a plain name.
var fixedRanks = map[string]float64{"count": 0, "sum": 1, "rate": 2, "avg": 3, "min": 4, "max": 6, "stddev": 7, "stdvar": 8, "histogram": 9}

// outputRank orders a series' outputs on its line: count, sum, rate, avg, min, the percentiles
// from the lowest, max, stddev, stdvar, histogram, the distinct counts, anything else.
func outputRank(output string) float64 {
	if r, ok := fixedRanks[output]; ok {
		return r
	}
	if percentile.MatchString(output) {
		q, _ := strconv.ParseFloat("0."+output[1:], 64) // p50 is 0.50, p999 is 0.999
		return 5 + q
	}
	if strings.HasPrefix(output, "distinct.") {
		return 10
	}
	return 11
}

// seriesOf is how a point's attributes name its series: key=value, space-separated, in their order;
// (all) for an aggregation without group_by.
func seriesOf(attrs pcommon.Map) string {
	if attrs.Len() == 0 {
		return "(all)"
	}
	parts := make([]string, 0, attrs.Len())
	for k, v := range attrs.All() {
		parts = append(parts, k+"="+v.AsString())
	}
	return strings.Join(parts, " ")
}

// points returns the data points of md, of every metric type but summaries (the component emits
// none).
func points(md pmetric.Metrics) []point {
	var out []point
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				agg, output := splitName(m.Name())
				base := point{agg: agg, output: output, unit: m.Unit()}
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					base.gauge = true
					out = appendNumbers(out, base, m.Gauge().DataPoints())
				case pmetric.MetricTypeSum:
					out = appendNumbers(out, base, m.Sum().DataPoints())
				case pmetric.MetricTypeHistogram:
					for _, dp := range m.Histogram().DataPoints().All() {
						out = append(out, histogramPoint(base, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), dp.Count()))
					}
				case pmetric.MetricTypeExponentialHistogram:
					for _, dp := range m.ExponentialHistogram().DataPoints().All() {
						out = append(out, histogramPoint(base, dp.Attributes(), dp.StartTimestamp(), dp.Timestamp(), dp.Count()))
					}
				}
			}
		}
	}
	return out
}

// appendNumbers appends the number points dps of a metric described by base to out.
func appendNumbers(out []point, base point, dps pmetric.NumberDataPointSlice) []point {
	for _, dp := range dps.All() {
		p := base
		p.series = seriesOf(dp.Attributes())
		p.win = window{int64(dp.StartTimestamp()), int64(dp.Timestamp())}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			p.value = float64(dp.IntValue())
		} else {
			p.value = dp.DoubleValue()
		}
		out = append(out, p)
	}
	return out
}

// histogramPoint is a histogram data point, taken by its count of values.
func histogramPoint(base point, attrs pcommon.Map, start, ts pcommon.Timestamp, count uint64) point {
	base.series = seriesOf(attrs)
	base.win = window{int64(start), int64(ts)}
	base.value = float64(count)
	return base
}
