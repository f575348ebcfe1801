package e2e

// The operator's view in a real browser: Debian's chromium, headless, driven by chromedp, against the
// built distribution with the window_aggregator_view extension, fed spans from two services of
// which one is 3 s behind (per_source by service.name), in batches every 500 ms: the page shows the W
// chart with points (the extension's history, drawn at once when the page is opened again), the
// records by outcome charts, the late outcomes each on its own line, the sources table with the slow
// service marked as holding W back, the health strip at the top (lag, the holder and how far it is
// behind the other source, late records per second, overdue windows, emission), the windows W has
// passed the fire time of marked overdue, the windows table once for the component, times labelled
// UTC, a wall clock that moves, the aggregation with its records by outcome, the explainer answering
// for the fast service's series with its windows and its last emitted values in their units, and no
// console error. The on-time rate drawn right after opening the page again stays near the steady
// rate sent: the history and the live readings join without a spike or a dip. Screenshots go to
// _build/view.png and _build/view-explainer.png.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium is the browser the test drives: $CHROMIUM (make test sets it), else chromium on PATH.
func chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs Debian's chromium on PATH (sudo apt-get install -y chromium; .ci/run installs it): %v", err)
	}
	return p
}

func TestViewInABrowser(t *testing.T) {
	skipShort(t)
	chromiumPath := chromium(t)
	recv, viewPort := freePort(t), freePort(t)
	config := otlpReceiver(recv) + fmt.Sprintf(`
extensions:
  window_aggregator_view: {endpoint: 127.0.0.1:%d}
connectors:
  window_aggregator:
    window: {size: 1s}
    watermark: {per_source: [service.name], max_out_of_orderness: 5s}
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name], unit: ms, outputs: [count, avg, p50, p99, stddev, rate, "distinct:trace_id"]}
      - {name: cnt, signal: spans, group_by: [service.name], outputs: [count]}
exporters:
  debug: {verbosity: basic}
service:
  extensions: [window_aggregator_view]
  pipelines:
    traces: {receivers: [otlp], exporters: [window_aggregator]}
    metrics: {receivers: [window_aggregator], exporters: [debug]}
`, viewPort)
	col, c := runCollector(t, recv, config)
	defer col.stop(t)
	stop := make(chan struct{})
	var fed sync.WaitGroup
	fedFrom := time.Now()
	fed.Go(func() {
		// 10 spans of each service every 500 ms: 40 spans a second on time, each 5 ms long.
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now().UnixNano()
			var fast, slow []int64
			for i := range int64(10) {
				fast, slow = append(fast, now-i*int64(time.Millisecond)), append(slow, now-int64(3*time.Second)-i*int64(time.Millisecond))
			}
			exportTraces(t, c, svcSpans("fast", "/x", fast...))
			exportTraces(t, c, svcSpans("slow", "/x", slow...))
		}
	})
	defer func() { close(stop); fed.Wait() }()

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	var mu sync.Mutex
	var consoleErrors []string
	listening := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError {
				consoleErrors = append(consoleErrors, fmt.Sprint(e.Args))
			}
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, e.ExceptionDetails.Text)
		}
	})
	if listening != nil {
		t.Fatalf("cannot start the browser: %v", listening)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", viewPort)
	// A W chart with points takes two polls with a watermark; the slow service holds W back once
	// both have sent.
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("the page at %s, %s: %v", url, what, err)
		}
	}
	_, err := chromedp.Run(ctx, chromedp.Navigate(url))
	step("navigate", err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`svg.wchart path.series`)))
	step("the W chart", err)
	// The wall clock moves with W: read 2 s apart, it has advanced by about 2 s, and W is never ahead.
	clock := func() (wall, w time.Time) {
		t.Helper()
		texts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector(".wall")?.textContent ?? "", document.querySelector(".w")?.textContent ?? ""]`))
		step("the wall clock and W", err)
		day := time.Now().UTC().Format("2006-01-02 ")
		wall, errWall := time.Parse("2006-01-02 15:04:05.000", day+strings.TrimSpace(texts[0]))
		w, errW := time.Parse("2006-01-02 15:04:05.000", day+strings.TrimSpace(texts[1]))
		if errWall != nil || errW != nil {
			t.Errorf("the wall clock %q and W %q are not times: %v %v", texts[0], texts[1], errWall, errW)
		}
		return wall, w
	}
	_, err = chromedp.Run(ctx, chromedp.Sleep(2*time.Second)) // W from both sources
	step("wait", err)
	wall1, w1 := clock()
	_, err = chromedp.Run(ctx, chromedp.Sleep(2*time.Second))
	step("wait", err)
	wall2, w2 := clock()
	if d := wall2.Sub(wall1); d < 1500*time.Millisecond || d > 3500*time.Millisecond {
		t.Errorf("the page's wall clock moved %v in 2 s (%v, then %v)", d, wall1, wall2)
	}
	if w1.After(wall1) || w2.After(wall2) {
		t.Errorf("W ahead of the wall clock on the page: W %v at %v, W %v at %v", w1, wall1, w2, wall2)
	}
	// Enough readings that the rates drawn after opening the page again span 5 s of steady sending.
	_, err = chromedp.Run(ctx, chromedp.Sleep(8*time.Second))
	step("wait", err)
	// Opened again, the page draws the extension's history at once: more points than its own polls.
	_, err = chromedp.Run(ctx, chromedp.Navigate(url))
	step("navigate again", err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`svg.wchart path.series`)))
	step("the W chart", err)
	points, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelector("svg.wchart path.series").getAttribute("d").split("L").length`))
	step("the W chart's points", err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`svg.outcomes path.series`)))
	step("the records by outcome chart", err)
	// Three live readings after the history's: the join is drawn.
	_, err = chromedp.Run(ctx, chromedp.Sleep(3500*time.Millisecond))
	step("wait", err)
	// The on-time line of lat's chart: its points' [time, records per second], read from the page.
	rates, err := chromedp.Run(ctx, chromedp.Evaluate[[][2]float64](`JSON.parse(document.querySelector("svg.outcomes path.series").dataset.points ?? "[]")`))
	step("the on-time rates drawn", err)
	lateLegend, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("svg.late")?.textContent ?? ""`))
	step("the late records chart", err)
	health, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("section.component > .health")?.textContent ?? ""`))
	step("the health strip", err)
	firstInSection, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("section.component > h2").nextElementSibling.classList[0]`))
	step("what comes first", err)
	overdue, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.windows tr.overdue").length`))
	step("the overdue windows", err)
	windowTables, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("section.component table.windows").length`))
	step("the windows tables", err)
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#status`)))
	step("the status line", err)
	wLine, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.w`)))
	step("W", err)
	wLineParent, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".w").parentElement.textContent`))
	step("W's line", err)
	historyKeys, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`fetch("/api/v1/history").then(r => r.json()).then(h => Object.keys(h[0].samples[h[0].samples.length-1].records))`,
		func(p *runtime.EvaluateParams) { p.AwaitPromise = new(true) }))
	step("the history's records", err)
	holder, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`table.sources tr.holds`)))
	step("the source holding W", err)
	aggregation, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`h3.aggregation`)))
	step("the aggregation", err)
	records, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.summary`)))
	step("its records", err)
	// The explainer, for the fast service's series: asked once, it keeps the series' values; asked
	// again once windows have fired, it shows them.
	_, err = chromedp.Run(ctx, chromedp.SendKeys(chromedp.CSS(`form.explain input[name="key.service.name"]`), "fast"))
	step("naming a series", err)
	_, err = chromedp.Run(ctx, chromedp.Click(chromedp.CSS(`form.explain button`)))
	step("asking", err)
	_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`.explanation p.answer`)))
	step("the first answer", err)
	// W is 8 s behind the wall clock (the slow service's 3 s and max_out_of_orderness): the
	// series' first windows fire some seconds after the first question.
	for shown := false; !shown; {
		_, err = chromedp.Run(ctx, chromedp.Sleep(time.Second))
		step("wait for windows to fire", err)
		_, err = chromedp.Run(ctx, chromedp.Click(chromedp.CSS(`form.explain button`)))
		step("asking again", err)
		_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`.explanation p.last`)))
		step("the answer", err)
		shown, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(".explanation svg.series-chart rect.bar") !== null`))
		step("the series' last values", err)
	}
	answer, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.explanation p.answer`)))
	step("the answer", err)
	last, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.explanation p.last`)))
	step("its last values", err)
	lastTable, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.explanation p.last + svg + table`)))
	step("its last values' table", err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
	step("screenshot", err)
	root, _ := filepath.Abs("..")
	if err := os.WriteFile(filepath.Join(root, "_build", "view.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	explainer, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(`section.component .explanation`)))
	step("the explainer's screenshot", err)
	if err := os.WriteFile(filepath.Join(root, "_build", "view-explainer.png"), explainer, 0o644); err != nil {
		t.Fatal(err)
	}
	// 40 spans a second on time, in batches every 500 ms: a rate over readings 1 s apart sees 1, 2
	// or 3 batches; drawn over 5 s it stays within a fifth of 40 once 5 s of sending are behind it.
	if len(rates) < 8 {
		t.Errorf("the on-time line has %d points, want the history's and the live ones", len(rates))
	}
	for _, p := range rates {
		if p[1] > 48 || (p[0] >= float64(fedFrom.Add(6*time.Second).UnixMilli()) && p[1] < 32) {
			t.Errorf("the on-time rate drawn at %v is %.1f/s, sent 40/s: %v", time.UnixMilli(int64(p[0])).UTC(), p[1], rates)
			break
		}
	}
	for _, outcome := range []string{"late routed", "late dropped", "late passed", "late accepted"} {
		if !strings.Contains(lateLegend, outcome) {
			t.Errorf("the late records chart %q has no line %q", lateLegend, outcome)
		}
	}
	if firstInSection != "health" {
		t.Errorf("the first thing under the component's title is %q, want the health strip", firstInSection)
	}
	if !regexp.MustCompile(`held by service\.name=slow, 3\.[0-5] s behind the next source`).MatchString(health) {
		t.Errorf("the health strip %q does not name the slow service and how far behind it is", health)
	}
	for _, want := range []string{"lag 8.", "late routed 0.0/s", "dropped 0.0/s", "overdue", "emission ok"} {
		if !strings.Contains(health, want) {
			t.Errorf("the health strip %q does not say %q", health, want)
		}
	}
	if overdue == 0 {
		t.Errorf("no window is marked overdue: W is 8 s behind the wall clock, windows of 1 s fire 3 s after the clock passed end + max_out_of_orderness, 2 s after it passed that + the slide")
	}
	if windowTables != 1 {
		t.Errorf("%d windows tables for one component of two aggregations, want one", windowTables)
	}
	if !strings.Contains(status, "UTC") || !strings.Contains(wLineParent, "UTC") || strings.Contains(status, "AM") || strings.Contains(status, "PM") {
		t.Errorf("times not labelled UTC: status %q, W's line %q (W %q)", status, wLineParent, wLine)
	}
	if strings.Join(historyKeys, ",") != "cnt,lat" && strings.Join(historyKeys, ",") != "lat,cnt" {
		t.Errorf("the history's records are keyed by %v, want the aggregations' names", historyKeys)
	}
	if points < 4 {
		t.Errorf("the W chart, drawn at once on opening the page again, has %d points, want the history's, at least 4", points)
	}
	if !strings.Contains(holder, "service.name=slow") || !strings.Contains(holder, "holds W back") {
		t.Errorf("the row marked as holding W back: %q, want the slow service", holder)
	}
	if !strings.Contains(aggregation, "lat (spans)") || !strings.Contains(records, "records on time") || strings.Contains(records, "on time 0,") {
		t.Errorf("the aggregation: %q, %q; want lat with records on time", aggregation, records)
	}
	if !strings.Contains(answer, "window(s) hold its records") || !strings.Contains(last, "Its last emitted windows") {
		t.Errorf("the explainer for service.name=fast: %q, %q; want its windows and its last values", answer, last)
	}
	for _, output := range []string{"p50 5 ms", "p99 5 ms", "stddev 0 ms", "{span}/s", "distinct.trace_id "} {
		if !strings.Contains(lastTable, output) {
			t.Errorf("the explainer's last values %q do not show output %s", lastTable, output)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("console errors: %v", consoleErrors)
	}
}
