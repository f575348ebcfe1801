package main

import (
	"io"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const (
	// settle is how long a window's results wait for more of the same firing before its lines are
	// printed: the connector sends the results of each input signal (spans, logs, metrics) in a
	// request of its own, and the exporter may split or reorder them.
	settle = time.Second
	// idleReport is how often the late line is printed on its own while no window's lines are; at
	// least one and a half windows, so that it does not race the next window's lines.
	idleReport = 10 * time.Second
	// seenHorizon is how long, in event time behind the newest window printed, a window's first
	// results are remembered (to tell a later firing of it from its first).
	seenHorizon = int64(time.Hour)
)

// resultKey names one output of one series in one window (by its end: the slide of a delta sum and
// the window of a gauge end together).
type resultKey struct {
	agg, series, output string
	end                 int64
}

// printer turns the component's results and routed late records into lines: a header and a line a
// series for each window, at its first firing; what later firings add, and the routed records, in a
// late line after each window's lines. Time comes in as arguments; it is not safe for concurrent use.
type printer struct {
	out        io.Writer
	pending    map[int64]*block // windows whose first results are waiting to be printed, by end
	seen       map[resultKey]bool
	printedEnd int64 // the greatest end of a window printed
	windowSize int64 // of the window printed last, ns
	late       lateTally
	lastReport time.Time // when the late line was last printed, or the start
}

// block is a window's first results, by aggregation and series.
type block struct {
	end        int64
	gaugeStart int64 // the window's start, from a gauge; 0: no gauge yet
	otherStart int64 // the least start of the other points
	rows       map[[2]string]map[string]point
	updated    time.Time
}

func newPrinter(out io.Writer, start time.Time) *printer {
	return &printer{
		out:        out,
		pending:    map[int64]*block{},
		seen:       map[resultKey]bool{},
		lastReport: start,
	}
}

// metrics takes a request of window results. The first point of an output of a series in a window
// goes on the window's line; another one (a later firing) into the late line, as does the first of a
// window that ends no later than one already printed: windows fire in the order of their ends, so
// that is a later firing too (of a series the window did not have, or of a window that had none).
func (p *printer) metrics(md pmetric.Metrics, now time.Time) {
	for _, pt := range points(md) {
		k := resultKey{pt.agg, pt.series, pt.output, pt.win.end}
		first := !p.seen[k] && pt.win.end > p.printedEnd
		p.seen[k] = true
		if !first {
			p.late.revision(pt)
			continue
		}
		b := p.pending[pt.win.end]
		if b == nil {
			b = &block{end: pt.win.end, rows: map[[2]string]map[string]point{}}
			p.pending[pt.win.end] = b
		}
		b.add(pt)
		b.updated = now
	}
}

func (b *block) add(pt point) {
	if pt.gauge {
		if b.gaugeStart == 0 || pt.win.start < b.gaugeStart {
			b.gaugeStart = pt.win.start
		}
	} else if b.otherStart == 0 || pt.win.start < b.otherStart {
		b.otherStart = pt.win.start
	}
	row := [2]string{pt.agg, pt.series}
	if b.rows[row] == nil {
		b.rows[row] = map[string]point{}
	}
	b.rows[row][pt.output] = pt
}

// traces takes a request of routed late spans: each is a late record, at its end time.
func (p *printer) traces(td ptrace.Traces) {
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				p.late.spans.add(s.Attributes(), int64(s.EndTimestamp()))
			}
		}
	}
}

// logs takes a request of routed late logs: each is a late record, at its timestamp, else its
// observed timestamp.
func (p *printer) logs(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, r := range sl.LogRecords().All() {
				t := r.Timestamp()
				if t == 0 {
					t = r.ObservedTimestamp()
				}
				p.late.logs.add(r.Attributes(), int64(t))
			}
		}
	}
}

// tick prints the windows whose results have settled, oldest first, then the late line; with no
// window to print, the late line alone once idleReport (or one and a half windows) has passed since
// the last, if anything came late.
func (p *printer) tick(now time.Time) {
	var due []*block
	for _, b := range p.pending {
		if now.Sub(b.updated) >= settle {
			due = append(due, b)
		}
	}
	if len(due) > 0 {
		p.print(due, now)
		return
	}
	if now.Sub(p.lastReport) >= max(idleReport, time.Duration(p.windowSize/2*3)) {
		if !p.late.empty() {
			p.report()
		}
		p.lastReport = now
	}
}

// flush prints every window waiting, and the late line if there is one to print: at shutdown.
func (p *printer) flush(now time.Time) {
	due := make([]*block, 0, len(p.pending))
	for _, b := range p.pending {
		due = append(due, b)
	}
	if len(due) > 0 {
		p.print(due, now)
	} else if !p.late.empty() {
		p.report()
	}
}

// print prints the windows of due in order of their ends, then the late line.
func (p *printer) print(due []*block, now time.Time) {
	sort.Slice(due, func(i, j int) bool { return due[i].end < due[j].end })
	var b strings.Builder
	for _, w := range due {
		p.windowSize = w.end - w.write(&b)
		delete(p.pending, w.end)
		p.printedEnd = max(p.printedEnd, w.end)
	}
	_, _ = io.WriteString(p.out, b.String())
	p.report()
	p.lastReport = now
	for k := range p.seen {
		if k.end < p.printedEnd-seenHorizon {
			delete(p.seen, k)
		}
	}
}

// report prints the late line and starts a new tally.
func (p *printer) report() {
	_, _ = io.WriteString(p.out, p.late.line()+"\n")
	p.late = lateTally{}
}

// write writes the window's header and a line per aggregation and series, sorted, with the
// aggregations' names and the series in columns. It returns the window's start.
func (b *block) write(out *strings.Builder) (start int64) {
	start = b.gaugeStart
	if start == 0 {
		start = b.otherStart
	}
	out.WriteString("window " + bounds(window{start, b.end}) + "\n")
	rows := make([][2]string, 0, len(b.rows))
	widths := [2]int{}
	for r := range b.rows {
		rows = append(rows, r)
		widths[0], widths[1] = max(widths[0], len(r[0])), max(widths[1], len(r[1]))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i][0] != rows[j][0] {
			return rows[i][0] < rows[j][0]
		}
		return rows[i][1] < rows[j][1]
	})
	for _, r := range rows {
		out.WriteString("  " + pad(r[0], widths[0]) + "  " + pad(r[1], widths[1]) + " ")
		out.WriteString(values(b.rows[r]) + "\n")
	}
	return start
}

// values is a series' outputs, output=value with its unit, in outputRank's order: count=155
// avg=62.3ms p50=50.1ms. A count or distinct count goes without its unit ({span}); a histogram
// gives its number of values.
func values(outputs map[string]point) string {
	names := make([]string, 0, len(outputs))
	for name := range outputs {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := outputRank(names[i]), outputRank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, name := range names {
		pt := outputs[name]
		v := number(pt.value)
		switch {
		case name == "histogram":
			v = withUnit(v, "{value}")
		case name == "count" || strings.HasPrefix(name, "distinct."):
		default:
			v = withUnit(v, pt.unit)
		}
		parts[i] = name + "=" + v
	}
	return strings.Join(parts, " ")
}
