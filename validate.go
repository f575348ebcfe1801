package windowaggregator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/ottl"

	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// Validation of a configuration: every invalid setting is reported, each naming its key and the
// reason; the enumerations are checked where they are read too (enums.go), and OTTL is parsed here
// once for the component (Config.parsers).

// minWindow is the least window size and slide: a bare number in YAML is nanoseconds, and nobody
// means a window of 10 ns.
const minWindow = time.Millisecond

// maxPanesPerSeries bounds the panes one series holds while W follows the clock (memory.go's P
// without max_future_skew, whose panes only records stamped ahead of the clock make): past it one
// series could hold more memory than any collector has.
const maxPanesPerSeries = 1_000_000

// Validate reports every invalid setting, each naming its key and the reason.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Window.Size <= 0 || c.Window.Size > maxDuration {
		bad("window.size", "is required and must be > 0 and <= %s, got %s", maxDuration, c.Window.Size)
	} else if c.Window.Size < minWindow {
		bad("window.size", "must be at least %s, got %s: a number without a unit is read as nanoseconds (write 10s, not 10)", minWindow, c.Window.Size)
	}
	if s := c.Window.Slide; s > 0 && s < minWindow {
		bad("window.slide", "must be at least %s, got %s: a number without a unit is read as nanoseconds (write 10s, not 10)", minWindow, s)
	}
	if o, s := c.Window.Offset, c.Window.slide(); s > 0 && (o <= -s || o >= s) {
		bad("window.offset", "must be strictly between -%s and %s (the slide), got %s", s, s, o)
	}
	switch e := c.Window.EarlyResults; {
	case e == 0:
	case e < 0 || e >= c.Window.Size:
		bad("window.early_results", "must be > 0 and < window.size (%s), got %s", c.Window.Size, e)
	case c.Window.slide() != c.Window.Size:
		bad("window.early_results", "applies to tumbling windows only: a sliding window has a result every slide (%s)", c.Window.Slide)
	}
	if s := c.Window.Slide; s < 0 || s > c.Window.Size && c.Window.Size > 0 {
		bad("window.slide", "must be > 0 and <= window.size (%s), got %s", c.Window.Size, s)
	} else if s > 0 && c.Window.Size > 0 && c.Window.Size%s != 0 {
		bad("window.slide", "window.size (%s) must be a whole multiple of it, got %s", c.Window.Size, s)
	} else if s > 0 && c.Window.Size/s > stream.MaxPanesPerWindow {
		bad("window.slide", "window.size / window.slide must be at most %d (a record is in that many windows), got %s / %s = %d",
			stream.MaxPanesPerWindow, c.Window.Size, s, c.Window.Size/s)
	} else if s := c.Window.slide(); s >= minWindow && c.AllowedLateness >= 0 && c.Watermark.MaxOutOfOrderness >= 0 &&
		c.AllowedLateness <= maxDuration && c.Watermark.MaxOutOfOrderness <= maxDuration {
		if p := int64((c.Window.Size+c.AllowedLateness+c.Watermark.MaxOutOfOrderness)/s) + 1; p > maxPanesPerSeries {
			bad("window.slide", "a series holds (window.size + allowed_lateness + watermark.max_out_of_orderness) / slide + 1 = %d panes, more than %d: "+
				"make the slide longer or those shorter", p, maxPanesPerSeries)
		}
	}
	seenSource := map[string]bool{}
	for _, k := range c.Watermark.PerSource {
		switch {
		case k == "":
			bad("watermark.per_source", "empty key")
		case seenSource[k]:
			bad("watermark.per_source", "key %q listed twice", k)
		}
		seenSource[k] = true
	}
	if c.Watermark.SourceIdleTimeout <= 0 || c.Watermark.SourceIdleTimeout > maxDuration {
		bad("watermark.source_idle_timeout", "must be > 0 and <= %s, got %s", maxDuration, c.Watermark.SourceIdleTimeout)
	}
	if m := c.Watermark.MaxSources; m <= 0 || m > stream.MaxSourcesLimit {
		bad("watermark.max_sources", "must be between 1 and %d, got %d", stream.MaxSourcesLimit, m)
	}
	for _, kd := range []struct {
		key string
		d   time.Duration
	}{ // in the order of the keys in the configuration, so that errors come in a stable order
		{"watermark.max_out_of_orderness", c.Watermark.MaxOutOfOrderness},
		{"watermark.idle_timeout", c.Watermark.IdleTimeout},
		{"watermark.max_future_skew", c.Watermark.MaxFutureSkew},
		{"allowed_lateness", c.AllowedLateness},
		{"series_expiration", c.SeriesExpiration},
		{"checkpoint.interval", c.Checkpoint.Interval},
	} {
		if kd.d < 0 || kd.d > maxDuration {
			bad(kd.key, "must be between 0s and %s, got %s", maxDuration, kd.d)
		}
	}
	if c.Emit.Interval <= 0 {
		bad("emit.interval", "must be > 0, got %s", c.Emit.Interval)
	}
	if c.Emit.MaxPointsPerSend <= 0 {
		bad("emit.max_points_per_send", "must be > 0, got %d", c.Emit.MaxPointsPerSend)
	}
	if c.Emit.MaxPendingPoints < c.Emit.MaxPointsPerSend {
		bad("emit.max_pending_points", "must be at least emit.max_points_per_send (%d), got %d", c.Emit.MaxPointsPerSend, c.Emit.MaxPendingPoints)
	}
	c.Dedup.check(bad)
	switch c.ErrorMode {
	case ottl.IgnoreError, ottl.SilentError, ottl.PropagateError:
	default:
		bad("error_mode", "must be %q, %q or %q, got %q", ottl.IgnoreError, ottl.SilentError, ottl.PropagateError, c.ErrorMode)
	}
	for _, e := range []struct {
		key string
		err error
	}{{"late_data.action", c.LateData.Action.check()}, {"temporality", c.Temporality.check()}, {"late_firings", c.LateFirings.check()}} {
		if e.err != nil {
			bad(e.key, "%v", e.err)
		}
	}
	if c.LateFirings == lateRevise && c.Temporality == temporalityCumulative {
		bad("late_firings", "revise needs temporality: delta (cumulative totals take late records in their next point)")
	}
	if c.SeriesExpiration == 0 {
		bad("series_expiration", "must be > 0")
	}
	if c.MaxSeries <= 0 {
		bad("max_series", "must be > 0, got %d", c.MaxSeries)
	}
	if c.MaxInputStreams <= 0 {
		bad("max_input_streams", "must be > 0, got %d", c.MaxInputStreams)
	}
	if len(c.Aggregations) == 0 {
		bad("aggregations", "at least one aggregation is required")
	}
	names := map[string]bool{}
	for i, a := range c.Aggregations {
		key := fmt.Sprintf("aggregations[%d]", i)
		if a.Name != "" {
			key = fmt.Sprintf("aggregations[%d] (%s)", i, a.Name)
		}
		errs = append(errs, a.validate(key, names, c.parsers(ingest.ValidationSettings))...)
	}
	return errors.Join(errs...)
}

func (a *AggregationConfig) validate(key string, names map[string]bool, parsers *ingest.OTTLParsers) []error {
	v := &aggregationCheck{a: a, key: key, parsers: parsers}
	switch {
	case a.Name == "":
		v.bad("name", "is required")
	case names[a.Name]:
		v.bad("name", "%q is used by another aggregation; names must be unique", a.Name)
	case strings.TrimSpace(a.Name) != a.Name:
		v.bad("name", "%q has leading or trailing spaces", a.Name)
	}
	names[a.Name] = true
	v.sg = ingest.SignalNamed(string(a.Signal))
	if err := a.Signal.check(); err != nil {
		v.bad("signal", "%v", err)
		v.sg = &ingest.Signal{} // reads nothing: the other keys are checked as far as they can be
	}
	v.where()
	v.groupBy()
	hasValue := v.value()
	v.weightAndUnit()
	outs := v.outputs(hasValue)
	v.histogram(outs)
	v.exemplars(outs)
	return v.errs
}

// aggregationCheck is the validation of one aggregation: what it found wrong, each error naming the
// aggregation's key and the sub-key.
type aggregationCheck struct {
	a       *AggregationConfig
	key     string
	sg      *ingest.Signal
	parsers *ingest.OTTLParsers
	parser  ingest.OTTLParser // taken for the first expression
	errs    []error
}

func (v *aggregationCheck) bad(sub, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("%s.%s: %s", v.key, sub, fmt.Sprintf(format, args...)))
}

// parse checks that OTTL expression expr parses for the signal, as what says (condition, value), and
// keeps what it parsed for the component (see Config.parsers).
func (v *aggregationCheck) parse(sub, expr string, what func(ingest.OTTLParser, string) error) {
	if v.parser == nil && v.sg.OTTL != nil {
		var err error
		if v.parser, err = v.parsers.Parser(v.sg.Name, v.sg.NewParser); err != nil {
			v.bad(sub, "%v", err)
			return
		}
	}
	switch {
	case strings.TrimSpace(expr) == "":
		v.bad(sub, "empty OTTL expression")
	case v.parser == nil:
		v.bad(sub, "%s take no OTTL", v.a.Signal)
	default:
		if err := what(v.parser, expr); err != nil {
			v.bad(sub, "%v", err)
		}
	}
}

func isCondition(p ingest.OTTLParser, expr string) error { _, err := p.Condition(expr); return err }
func isValue(p ingest.OTTLParser, expr string) error     { _, err := p.Value(expr); return err }

func (v *aggregationCheck) where() {
	a, sg := v.a, v.sg
	if sg.Points && (a.Where == nil || len(a.Where.MetricNames) == 0) {
		defer v.bad("where.metric_names", "is required for signal: metrics (the metrics whose points it takes)")
	}
	if a.Where == nil {
		return
	}
	if len(a.Where.SpanKind) > 0 && !sg.Kinds {
		v.bad("where.span_kind", "applies to spans only")
	}
	for _, k := range a.Where.SpanKind {
		if _, ok := spanKindByConfig[k]; !ok {
			v.bad("where.span_kind", "unknown span kind %q (want one of unspecified, internal, server, client, producer, consumer)", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Where.Attributes)) { // a stable order of errors
		val := a.Where.Attributes[k]
		if k == "" {
			v.bad("where.attributes", "empty attribute key")
		}
		switch val.(type) {
		case string, bool, int, int64, float64, uint64:
		default:
			v.bad("where.attributes", "%q: value must be a string, number or bool, got %T", k, val)
		}
	}
	for i, expr := range a.Where.Conditions {
		v.parse(fmt.Sprintf("where.conditions[%d]", i), expr, isCondition)
	}
	if len(a.Where.MetricNames) > 0 && !sg.Points {
		v.bad("where.metric_names", "applies to signal: metrics only")
	}
	listed := map[string]bool{}
	for _, n := range a.Where.MetricNames {
		switch {
		case n == "":
			v.bad("where.metric_names", "empty metric name")
		case listed[n]:
			v.bad("where.metric_names", "%q listed twice", n)
		}
		listed[n] = true
	}
}

func (v *aggregationCheck) groupBy() {
	seen := map[string]bool{}
	for i, g := range v.a.GroupBy {
		sub, k := fmt.Sprintf("group_by[%d]", i), g.Key
		switch {
		case k == "":
			v.bad(sub, "a key is required (as in service.name, or {key: route, ottl: ...})")
		case seen[k]:
			v.bad(sub, "key %q listed twice", k)
		case g.OTTL == "" && ingest.FieldOwner(k) != nil && v.sg.Field(k) < 0:
			v.bad(sub, "%q applies to %s only", k, ingest.FieldOwner(k).Name)
		}
		seen[k] = true
		if g.OTTL != "" {
			v.parse(sub, g.OTTL, isValue)
		}
		switch g.Default.(type) {
		case nil, string, bool, int, int64, float64, uint64:
		default:
			v.bad(sub+".default", "must be a string, number or bool, got %T", g.Default)
		}
	}
}

// value checks the value key, and reports whether the aggregation has a value.
func (v *aggregationCheck) value() (hasValue bool) {
	a, sg := v.a, v.sg
	hasValue = sg.Duration || sg.Points // spans default to duration; metric points are values
	switch src := a.Value.Source; {
	case sg.Points && a.Value != (ValueConfig{}):
		v.bad("value", "a metrics aggregation takes the values of its points; value applies to spans and logs")
	case a.Value.OTTL != "":
		v.parse("value", a.Value.OTTL, isValue)
		hasValue = true
	case src == "":
	case src == valueDuration:
		if !sg.Duration {
			v.bad("value", "duration applies to spans only; %s take attribute:<key>", a.Signal)
		}
	case isAttribute(src):
		if key, _ := attributeKey(src); key == "" {
			v.bad("value", "attribute: needs a key, as in attribute:http.response.body.size")
		}
		hasValue = true
	default:
		v.bad("value", "must be duration, attribute:<key> or {ottl: <expression>}, got %q", src)
	}
	return hasValue
}

func (v *aggregationCheck) weightAndUnit() {
	a, sg := v.a, v.sg
	switch w, err := a.Weight, a.Weight.check(); {
	case err != nil:
		v.bad("weight", "%v", err)
	case w == "" || w == weightNoneName:
	case sg.Points:
		v.bad("weight", "applies to spans and logs; a metric point counts as itself (a histogram as its count)")
	case w == weightAdjustedCountName && !sg.AdjustedCount:
		v.bad("weight", "adjusted_count applies to spans only (%s carry no tracestate); use none or attribute:<key>", a.Signal)
	}
	switch err := a.Unit.check(); {
	case err != nil:
		v.bad("unit", "%v", err)
	case a.Unit != "" && !a.isDuration():
		v.bad("unit", "applies to value: duration only")
	}
}

// outputs checks the outputs, and returns the set of those configured.
func (v *aggregationCheck) outputs(hasValue bool) map[string]bool {
	outs := map[string]bool{}
	for _, o := range v.a.Outputs {
		if outs[o] {
			v.bad("outputs", "%q listed twice", o)
		}
		outs[o] = true
		def := delivery.Lookup(o)
		if def == nil {
			v.bad("outputs", "unknown output %q (want one of %s)", o, delivery.Names())
			continue
		}
		if def.NeedsValue() && !hasValue {
			v.bad("outputs", "%q needs a value; set value: attribute:<key>", o)
		}
		if key, ok := delivery.DistinctKey(o); ok {
			switch {
			case strings.TrimSpace(key) != key:
				v.bad("outputs", "%q: the key has leading or trailing spaces", o)
			case key == ingest.TraceIDKey && v.sg.Points:
				v.bad("outputs", "%q: metric points have no trace id; trace_id applies to spans and logs", o)
			case key != ingest.TraceIDKey && ingest.FieldOwner(key) != nil && v.sg.Field(key) < 0:
				v.bad("outputs", "%q: %q applies to %s only", o, key, ingest.FieldOwner(key).Name)
			}
		}
	}
	return outs
}

func (v *aggregationCheck) histogram(outs map[string]bool) {
	h := v.a.Histogram
	switch {
	case h == nil:
	case !outs[delivery.Histogram]:
		v.bad("histogram", "applies to the histogram output only")
	case h.Exponential != nil && h.Explicit != nil:
		v.bad("histogram", "set exponential or explicit, not both")
	case h.Exponential != nil:
		if m := h.Exponential.MaxSize; m != 0 && (m < minHistogramMaxSize || m > maxHistogramMaxSize) {
			v.bad("histogram.exponential.max_size", "must be between %d and %d (0: %d), got %d", minHistogramMaxSize, maxHistogramMaxSize, defaultHistogramMaxSize, m)
		}
	case h.Explicit != nil:
		if _, err := v.a.bucketBounds(1); err != nil {
			v.bad("histogram.explicit.buckets", "%v", err)
		}
	}
}

func (v *aggregationCheck) exemplars(outs map[string]bool) {
	if ex := v.a.Exemplars; ex.Enabled {
		switch {
		case !v.sg.Exemplars:
			v.bad("exemplars", "applies to spans only")
		case !outs[delivery.Histogram] && !outs[delivery.Max]:
			v.bad("exemplars", "go on the histogram and max outputs; this aggregation has neither")
		}
	}
	if m := v.a.Exemplars.MaxPerDataPoint; m < 0 || m > stream.MaxExemplars {
		v.bad("exemplars.max_per_data_point", "must be between 1 and %d (0: %d), got %d", stream.MaxExemplars, defaultExemplars, m)
	}
}

// maxDedupIDs bounds dedup.max_ids: a few gigabytes of identities.
const maxDedupIDs = 100_000_000

// check reports the dedup settings that are invalid.
func (d *DedupConfig) check(bad func(key, format string, args ...any)) {
	if d.MaxIDs <= 0 || d.MaxIDs > maxDedupIDs {
		bad("dedup.max_ids", "must be between 1 and %d, got %d", maxDedupIDs, d.MaxIDs)
	}
	if d.Logs == nil {
		return
	}
	if len(d.Logs.Key) == 0 {
		bad("dedup.logs.key", "lists no part; leave dedup.logs out not to deduplicate logs")
	}
	seen := map[LogPart]bool{}
	for _, p := range d.Logs.Key {
		if err := p.check(); err != nil {
			bad("dedup.logs.key", "%v", err)
		} else if seen[p] {
			bad("dedup.logs.key", "%q listed twice", p)
		}
		seen[p] = true
	}
}
