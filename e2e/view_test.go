package e2e

// The operator's view in a real browser: Debian's chromium, headless, driven by chromedp, against the
// built distribution with the window_aggregator_view extension, fed spans from two services of
// which one is 3 s behind (per_source by service.name): the page shows the W chart with points (the
// extension's history, drawn at once when the page is opened again), the records by outcome chart,
// the sources table with the slow service marked as holding W back, the aggregation with its
// records by outcome, the explainer answering for the fast service's series with its windows and
// its last emitted values, and no console error;
// a screenshot goes to _build/view.png.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

func TestViewInABrowser(t *testing.T) {
	skipShort(t)
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("the browser test needs Debian's chromium at %s (.ci/run installs it): %v", chromiumPath, err)
	}
	recv, viewPort := freePort(t), freePort(t)
	config := otlpReceiver(recv) + fmt.Sprintf(`
extensions:
  window_aggregator_view: {endpoint: 127.0.0.1:%d}
connectors:
  window_aggregator:
    window: {size: 1s}
    watermark: {per_source: [service.name], max_out_of_orderness: 5s}
    aggregations:
      - {name: lat, signal: spans, group_by: [service.name], outputs: [count, p99, stddev, rate, "distinct:trace_id"]}
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
	fed.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now().UnixNano()
			exportTraces(t, c, svcSpans("fast", "/x", now))
			exportTraces(t, c, svcSpans("slow", "/x", now-int64(3*time.Second)))
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
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
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
	_, err = chromedp.Run(ctx, chromedp.Sleep(3*time.Second)) // a few more readings: both sources
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
	for _, output := range []string{"p99 ", "stddev ", "rate ", "distinct.trace_id "} {
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
