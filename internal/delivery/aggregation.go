package delivery

import "github.com/windowaggregator/windowaggregator/internal/engine/stream"

// Aggregation is what delivery knows of one aggregation: what to build of its results, and which
// metrics outputs take them. The component compiles it from the configuration; delivery knows
// nothing else of it.
type Aggregation struct {
	// Name is the prefix of its metrics: <name>.<output>.
	Name string
	// Input is the signal it takes: the sinks of that input, or else every running one, take its
	// results (see Sinks).
	Input int
	// Record is what its count counts, the unit of count: {span}, {log}, {value}.
	Record string
	// GroupBy are its group_by keys, by position in a series key: the attributes of its points.
	GroupBy []string
	// Outputs are its configured outputs, in table order (Compile).
	Outputs []Emitted
	// Bounds are the explicit histogram output's bounds; nil: the histogram output is exponential,
	// of at most HistMax buckets a sign.
	Bounds  []float64
	HistMax int
	// StampsInstance: its output resources carry the outputs' service.instance.id (it does not group
	// by that key; see Emitter.SetInstance).
	StampsInstance bool
	// Unit is the unit of its value outputs, and MonotonicSum says whether its sum is monotonic,
	// asked when one of its metrics is made: a metrics aggregation learns both from its input.
	Unit         func() string
	MonotonicSum func() bool
}

// Gauges calls put with the name (as in the metric's name after "<name>.") and value of each of the
// aggregation's gauges of the whole window in firing r, as its metrics would carry them: those of
// its values only for a window with values.
func (a *Aggregation) Gauges(r *stream.Result, put func(name string, v float64)) {
	for i := range a.Outputs {
		if e := &a.Outputs[i]; e.def.ofWindowValues || e.def.ofWindow {
			if v, ok := e.gauge(r); ok {
				put(e.name, v)
			}
		}
	}
}

// Units calls put with the name (as in Gauges) and unit of each of the aggregation's outputs.
func (a *Aggregation) Units(put func(name, unit string)) {
	for i := range a.Outputs {
		put(a.Outputs[i].name, a.Outputs[i].unitOf(a))
	}
}

// unitOf is the unit of the output's metric in aggregation a: its row's rule applied to a's unit.
func (e *Emitted) unitOf(a *Aggregation) string {
	if e.def.metric == shapeCount {
		return "{" + a.Record + "}"
	}
	switch u := a.Unit(); e.def.unit {
	case unitSquared:
		if u != "" && u != "1" {
			u += "2"
		}
		return u
	case unitPerSecond:
		if !e.ofSum {
			u = "{" + a.Record + "}"
		}
		return u + "/s"
	case unitValues:
		return "{value}"
	default:
		return u
	}
}
