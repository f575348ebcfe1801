package windowaggregator

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A reference model of what OTTL selects, keys and values, against the component through its
// factories, on random spans and random aggregations. Each OTTL expression of the menus below has a
// model: a predicate on the model's spans (a condition), or a function of them (a computed key, a
// value), written from OTTL's documented semantics, not from the component: a missing attribute is
// nil, a comparison with nil is false, Int of a string that is not a number fails, ParseJSON of text
// that is not JSON fails, Concat writes nil as <nil>. The model then counts each window's records per
// series and sums their values; the component, run in either form with every error mode, must emit
// exactly those counts and sums, and count exactly the model's OTTL errors.

// modelSpan is one random span: every attribute may be missing ("").
type modelSpan struct {
	service, route, method, size, j string
	kind                            ptrace.SpanKind
	status                          ptrace.StatusCode
	end                             int64 // ns
	ms                              float64
	id                              uint64 // its trace and span ids (spanIDs)
}

// outcome of a model expression on a span: a value (any, nil for a missing one), or an error.
type modelResult struct {
	v   any
	err bool
}

type modelCondition struct {
	ottl  string
	model func(s *modelSpan) (bool, bool) // holds, fails
}

type modelExpr struct {
	ottl  string
	model func(s *modelSpan) modelResult
}

// sizeInt is Int(span.attributes["size"]): nil when missing, the number for an int or a numeric
// string, an error for another string.
func sizeInt(s *modelSpan) modelResult {
	switch {
	case s.size == "":
		return modelResult{}
	case strings.HasPrefix(s.size, "int:"):
		n, _ := strconv.ParseInt(strings.TrimPrefix(s.size, "int:"), 10, 64)
		return modelResult{v: n}
	}
	n, err := strconv.ParseInt(s.size, 10, 64)
	if err != nil {
		return modelResult{err: true}
	}
	return modelResult{v: n}
}

var modelConditions = []modelCondition{
	{`span.kind == SPAN_KIND_SERVER and span.attributes["http.route"] != "/health"`, func(s *modelSpan) (bool, bool) {
		return s.kind == ptrace.SpanKindServer && s.route != "/health", false
	}},
	{`span.status.code == STATUS_CODE_ERROR`, func(s *modelSpan) (bool, bool) { return s.status == ptrace.StatusCodeError, false }},
	{`IsMatch(span.attributes["http.route"], "^/api")`, func(s *modelSpan) (bool, bool) { return strings.HasPrefix(s.route, "/api"), false }},
	{`Int(span.attributes["size"]) > 100`, func(s *modelSpan) (bool, bool) {
		r := sizeInt(s)
		if r.err {
			return false, true
		}
		n, ok := r.v.(int64)
		return ok && n > 100, false
	}},
	{`ParseJSON(span.attributes["j"])["a"] == 1`, func(s *modelSpan) (bool, bool) {
		if s.j == "" || s.j == "oops" {
			return false, true // ParseJSON of nil, or of text that is not JSON, fails
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(s.j), &m)
		return m["a"] == float64(1), false
	}},
	{`resource.attributes["service.name"] == "b"`, func(s *modelSpan) (bool, bool) { return s.service == "b", false }},
}

var modelKeys = []modelExpr{
	{`Concat([span.attributes["http.request.method"], span.attributes["http.route"]], " ")`, func(s *modelSpan) modelResult {
		m, r := s.method, s.route
		if m == "" {
			m = "<nil>"
		}
		if r == "" {
			r = "<nil>"
		}
		return modelResult{v: m + " " + r}
	}},
	{`span.attributes["http.route"]`, func(s *modelSpan) modelResult {
		if s.route == "" {
			return modelResult{}
		}
		return modelResult{v: s.route}
	}},
	{`Int(span.attributes["size"])`, sizeInt},
	{`IsMatch(span.attributes["http.route"], "^/api")`, func(s *modelSpan) modelResult { return modelResult{v: strings.HasPrefix(s.route, "/api")} }},
	{`span.name`, func(s *modelSpan) modelResult { return modelResult{v: "op"} }},
}

var modelValues = []modelExpr{
	{`Double(span.attributes["size"])`, func(s *modelSpan) modelResult {
		r := sizeInt(s)
		if n, ok := r.v.(int64); ok {
			return modelResult{v: float64(n)}
		}
		return r // nil, or an error (Double of a string that is not a number)
	}},
	{`Int(span.attributes["size"]) * 2`, func(s *modelSpan) modelResult {
		r := sizeInt(s)
		if n, ok := r.v.(int64); ok {
			return modelResult{v: float64(2 * n)}
		}
		if r.err {
			return r
		}
		return modelResult{err: true} // nil * 2 fails
	}},
}

// modelAgg is one random aggregation: its configuration, and the model's expressions.
type modelAgg struct {
	cfg        AggregationConfig
	conditions []modelCondition
	keys       []*modelExpr // nil: the plain key service.name
	defaults   []any        // by key, nil: none
	value      *modelExpr   // nil: the span's duration
}

func randomModelAgg(rng *rand.Rand, i int) *modelAgg {
	m := &modelAgg{cfg: AggregationConfig{Name: "agg" + strconv.Itoa(i), Signal: "spans", Outputs: []string{"count", "sum", "stdvar", "rate"}}}
	for _, k := range rng.Perm(len(modelConditions))[:rng.IntN(3)] {
		m.conditions = append(m.conditions, modelConditions[k])
	}
	if len(m.conditions) > 0 {
		m.cfg.Where = &WhereConfig{}
		for _, c := range m.conditions {
			m.cfg.Where.Conditions = append(m.cfg.Where.Conditions, c.ottl)
		}
	}
	for k := range 1 + rng.IntN(3) {
		var def any
		if rng.IntN(2) == 0 {
			def = "dflt"
		}
		if k == 0 && rng.IntN(2) == 0 {
			m.keys, m.defaults = append(m.keys, nil), append(m.defaults, def)
			m.cfg.GroupBy = append(m.cfg.GroupBy, GroupByKey{Key: "service.name", Default: def})
			continue
		}
		e := &modelKeys[rng.IntN(len(modelKeys))]
		m.keys, m.defaults = append(m.keys, e), append(m.defaults, def)
		m.cfg.GroupBy = append(m.cfg.GroupBy, GroupByKey{Key: "k" + strconv.Itoa(k), OTTL: e.ottl, Default: def})
	}
	if rng.IntN(2) == 0 {
		m.value = &modelValues[rng.IntN(len(modelValues))]
		m.cfg.Value = ValueConfig{OTTL: m.value.ottl}
	}
	return m
}

// modelTyped is an attribute as attrString writes it.
func modelTyped(v any) string {
	switch x := v.(type) {
	case string:
		return x + "(Str)"
	case int64:
		return strconv.FormatInt(x, 10) + "(Int)"
	case bool:
		return strconv.FormatBool(x) + "(Bool)"
	}
	panic(fmt.Sprintf("model key of type %T", v))
}

type modelCell struct {
	count    uint64
	sum, abs float64
	values   []float64 // the model's: the window's values
	// the component's stdvar and rate; the model's from values and count
	stdvar, rate float64
}

// spread returns the population variance of the cell's values, by two passes.
func (c *modelCell) spread() float64 {
	if len(c.values) == 0 {
		return 0
	}
	var mean, m2 float64
	for _, v := range c.values {
		mean += v / float64(len(c.values))
	}
	for _, v := range c.values {
		m2 += (v - mean) * (v - mean)
	}
	return m2 / float64(len(c.values))
}

// expect runs the model's aggregation over the spans: the counts and sums per series and window start
// (seconds), and the OTTL errors by clause.
func (m *modelAgg) expect(spans []modelSpan) (map[string]*modelCell, [ingest.NumOTTLClauses]int64) {
	cells := map[string]*modelCell{}
	var errs [ingest.NumOTTLClauses]int64
	for i := range spans {
		s := &spans[i]
		selected := len(m.conditions) == 0
		for _, c := range m.conditions {
			ok, failed := c.model(s)
			if failed {
				errs[ingest.ClauseWhere]++
				continue
			}
			if ok {
				selected = true
				break
			}
		}
		if !selected {
			continue
		}
		var attrs []string
		for k, e := range m.keys {
			name, v := "service.name", any(s.service)
			if e != nil {
				name = "k" + strconv.Itoa(k)
				r := e.model(s)
				if r.err {
					errs[ingest.ClauseGroupBy]++
				}
				v = r.v
			}
			if v == nil {
				v = m.defaults[k]
			}
			if v != nil {
				attrs = append(attrs, name+"="+modelTyped(v))
			}
		}
		sort.Strings(attrs)
		value, hasValue := s.ms, true
		if m.value != nil {
			r := m.value.model(s)
			if r.err {
				errs[ingest.ClauseValue]++
			}
			f, ok := r.v.(float64)
			value, hasValue = f, ok
		}
		id := fmt.Sprintf("%s@%d", strings.Join(attrs, ","), s.end/int64(10*time.Second)*10)
		c := cells[id]
		if c == nil {
			c = &modelCell{}
			cells[id] = c
		}
		c.count++
		if hasValue {
			c.sum += value
			c.abs += math.Abs(value)
			c.values = append(c.values, value)
		}
	}
	return cells, errs
}

func randomModelSpans(rng *rand.Rand, n int) []modelSpan {
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	spans := make([]modelSpan, n)
	t := int64(time.Second)
	for i := range spans {
		t += rng.Int64N(int64(400 * time.Millisecond))
		spans[i] = modelSpan{
			service: pick("a", "b", "c"), route: pick("/api", "/api/v2", "/health", "/login", ""), method: pick("GET", "POST", ""),
			size: pick("int:5", "int:500", "150", "42", "abc", ""), j: pick(`{"a":1}`, `{"a":2}`, "oops", ""),
			kind:   []ptrace.SpanKind{ptrace.SpanKindServer, ptrace.SpanKindClient}[rng.IntN(2)],
			status: []ptrace.StatusCode{ptrace.StatusCodeUnset, ptrace.StatusCodeOk, ptrace.StatusCodeError}[rng.IntN(3)],
			end:    t, ms: float64(1 + rng.IntN(900)), id: uint64(i + 1),
		}
	}
	return spans
}

// toTraces is the spans as pdata, one resource per span.
func toTraces(spans []modelSpan) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, s := range spans {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", s.service)
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("op")
		tr, id := spanIDs(s.id)
		sp.SetTraceID(tr)
		sp.SetSpanID(id)
		sp.SetKind(s.kind)
		sp.Status().SetCode(s.status)
		sp.SetEndTimestamp(pcommon.Timestamp(s.end))
		sp.SetStartTimestamp(pcommon.Timestamp(s.end - int64(s.ms*1e6)))
		a := sp.Attributes()
		for k, v := range map[string]string{"http.route": s.route, "http.request.method": s.method, "j": s.j} {
			if v != "" {
				a.PutStr(k, v)
			}
		}
		switch {
		case strings.HasPrefix(s.size, "int:"):
			n, _ := strconv.ParseInt(strings.TrimPrefix(s.size, "int:"), 10, 64)
			a.PutInt("size", n)
		case s.size != "":
			a.PutStr("size", s.size)
		}
	}
	return td
}

// gotCells reads the component's delta count and sum points of an aggregation per series and window
// start (seconds).
func gotCells(all []pmetric.Metrics, name string) map[string]*modelCell {
	cells := map[string]*modelCell{}
	for _, p := range points(all) {
		base, out, ok := strings.Cut(p.metric, ".")
		if !ok || base != name {
			continue
		}
		id := fmt.Sprintf("%s@%d", p.attrs, p.start)
		c := cells[id]
		if c == nil {
			c = &modelCell{}
			cells[id] = c
		}
		switch out {
		case "count":
			c.count += uint64(p.value)
		case "sum":
			c.sum += p.value
		case "stdvar":
			c.stdvar = p.value
		case "rate":
			c.rate = p.value
		}
	}
	return cells
}

func TestOTTLMatchesReferenceModel(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 28))
		var aggs []*modelAgg
		cfg := baseConfig()
		cfg.AllowedLateness = 30 * time.Second // the copies below come well within it: all are duplicates
		for i := range 1 + rng.IntN(3) {
			m := randomModelAgg(rng, i)
			aggs = append(aggs, m)
			cfg.Aggregations = append(cfg.Aggregations, m.cfg)
		}
		mode := []string{"ignore", "silent", "propagate"}[seed%3]
		must(t, cfg.ErrorMode.UnmarshalText([]byte(mode)))
		spans := randomModelSpans(rng, 40+rng.IntN(200))
		form := forms[seed%2]
		t.Run(fmt.Sprintf("seed=%d/%s/%s", seed, form, mode), func(t *testing.T) {
			useFakeClock(t)
			// batches of 1 to 30 spans, in event-time order: every span is on time; shutting down (no
			// storage) fires the windows still open. After a third of them, an upstream's retry: a
			// random subset of the spans of the last two batches again, in a batch of its own. A copy
			// of a span that an aggregation took is a duplicate (dedup): the model's truth is that
			// without the copies. A copy of one that none took is judged again as the first was: its
			// OTTL errors count again.
			var batches []any
			var copied []modelSpan
			prev := 0
			for lo := 0; lo < len(spans); {
				hi := min(len(spans), lo+1+rng.IntN(30))
				batches = append(batches, toTraces(spans[lo:hi]))
				if rng.IntN(3) == 0 {
					var copies []modelSpan
					for _, sp := range spans[prev:hi] {
						if rng.IntN(2) == 0 {
							copies = append(copies, sp)
						}
					}
					rng.Shuffle(len(copies), func(i, j int) { copies[i], copies[j] = copies[j], copies[i] })
					if len(copies) > 0 {
						batches = append(batches, toTraces(copies))
						copied = append(copied, copies...)
					}
				}
				prev, lo = lo, hi
			}
			run := runIn(t, form, cfg, batches...)
			var judgedAgain []modelSpan
			for _, c := range copied {
				taken := false
				for _, m := range aggs {
					cells, _ := m.expect([]modelSpan{c})
					taken = taken || len(cells) > 0
				}
				if !taken {
					judgedAgain = append(judgedAgain, c)
				}
			}
			for _, m := range aggs {
				want, errs := m.expect(spans)
				_, again := m.expect(judgedAgain)
				for c := range errs {
					errs[c] += again[c]
				}
				got := gotCells(run.all, m.cfg.Name)
				for id, w := range want {
					g := got[id]
					if g == nil || g.count != w.count || math.Abs(g.sum-w.sum) > 1e-9*w.abs {
						t.Errorf("%s %s: got %+v, want count %d sum %v\nconfig %+v", m.cfg.Name, id, g, w.count, w.sum, m.cfg)
					} else if sv := w.spread(); math.Abs(g.stdvar-sv) > 1e-9*(1+sv) || g.rate != float64(w.count)/10 {
						t.Errorf("%s %s: stdvar %v rate %v, want %v and %v (two passes over %v)", m.cfg.Name, id, g.stdvar, g.rate, sv, float64(w.count)/10, w.values)
					}
				}
				for id, g := range got {
					if want[id] == nil {
						t.Errorf("%s %s: got %+v, the model has no such series and window\nconfig %+v", m.cfg.Name, id, g, m.cfg)
					}
				}
				for c, n := range errs {
					attrs := map[string]string{"aggregation": m.cfg.Name, "clause": ingest.OTTLClauseNames[c]}
					if got := counterValue(t, run.tel, "otelcol_window_aggregator_ottl_errors", attrs); got != n {
						t.Errorf("%s: ottl_errors%v = %d, the model's %d", m.cfg.Name, attrs, got, n)
					}
				}
			}
			if mode == "propagate" && len(run.errs) == 0 {
				var any int64
				for _, m := range aggs {
					_, errs := m.expect(spans)
					for _, n := range errs {
						any += n
					}
				}
				if any > 0 {
					t.Errorf("error_mode propagate: %d OTTL errors, and no consume call returned one", any)
				}
			}
		})
	}
}
