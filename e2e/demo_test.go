package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// demoRun is how long TestDemo lets the demo run before it stops it, at least: three or four
// windows' lines.
const demoRun = 40 * time.Second

// make demo, as scripts/demo.sh runs it (windowprint, the distribution on examples/demo.yaml, the load
// generator), on free ports: windowprint prints window lines with their values and units, and late
// lines naming records within allowed_lateness and routed past it; about a line a second at most;
// and an interrupt stops all three, windowprint printing the windows the collector fired as it
// stopped.
func TestDemo(t *testing.T) {
	skipShort(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, cmd := range []string{"loadgen", "windowprint"} {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "./cmd/"+cmd)
		build.Dir = root
		build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", cmd, err, out)
		}
	}

	demo := exec.Command("bash", "scripts/demo.sh", distBinary, filepath.Join(bin, "loadgen"), filepath.Join(bin, "windowprint"))
	demo.Dir = root
	demo.Env = append(os.Environ(),
		"DEMO_OTLP="+loopback(freePort(t)), "DEMO_PRINT="+loopback(freePort(t)), "DEMO_VIEW="+loopback(freePort(t)))
	// A process group of its own, so that a failed test leaves none of the three running.
	demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	demo.Stdout, demo.Stderr = stdout, stderr
	started := time.Now()
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- demo.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-demo.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})

	spanLine := regexp.MustCompile(`(?m)^  http\.server\.duration +service\.name=svc-[123] count=([0-9]+) ` +
		`avg=[0-9.]+ms p50=([0-9.]+)ms p95=[0-9.]+ms p99=([0-9.]+)ms max=[0-9.]+ms$`)
	lateLine := regexp.MustCompile(`(?m)^late: [0-9]+ spans?, [0-9]+ logs? within allowed_lateness, into windows [0-9:, ]+ UTC; ` +
		`[0-9]+ spans?, [0-9]+ logs? past it, routed, event time [0-9:]+(-[0-9:]+)? UTC$`)
	for deadline := started.Add(demoRun + 20*time.Second); ; time.Sleep(200 * time.Millisecond) {
		out := stdout.String()
		if time.Since(started) >= demoRun && spanLine.MatchString(out) && lateLine.MatchString(out) {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the demo ended by itself: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no window line of spans with count, avg, p50, p95, p99, max in ms, or no late line of records within allowed_lateness and routed, within %v", time.Since(started))
		}
	}
	running, ranFor := stdout.String(), time.Since(started)

	// Ctrl-C: the script stops the load generator, the collector (which fires its open windows),
	// then windowprint, which prints them.
	if err := demo.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo exited with %v after an interrupt", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not stop within 30 s of an interrupt")
	}
	elapsed := time.Since(started)
	out := stdout.String()
	if !strings.HasPrefix(out, running) || len(out) == len(running) {
		t.Errorf("nothing printed at the stop: the windows the collector fired as it stopped are missing")
	}

	for _, m := range spanLine.FindAllStringSubmatch(out, -1) {
		count, _ := strconv.Atoi(m[1])
		p50, _ := strconv.ParseFloat(m[2], 64)
		p99, _ := strconv.ParseFloat(m[3], 64)
		if count < 1 || p99 < p50 {
			t.Errorf("implausible: count %d, p50 %v ms, p99 %v ms in %q", count, p50, p99, m[0])
		}
	}
	if headers := regexp.MustCompile(`(?m)^window [0-9-]+ [0-9:]+ to [0-9:]+ UTC$`).FindAllString(out, -1); len(headers) < 2 {
		t.Errorf("%d window headers with their bounds in UTC, want 2 at least", len(headers))
	}
	// With traffic all along, each late line follows a window's lines: none comes alone.
	prev := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "late: ") && !strings.HasPrefix(prev, "  ") {
			t.Errorf("a late line that follows no window's lines: %q after %q", line, prev)
		}
		prev = line
	}
	// About a line a second while it runs (a window's 9 lines every 10 s). At the stop come the
	// lines of the windows the collector fires as it stops: the one open, and the one just closed
	// if its lines had not come yet.
	lines, atStop := strings.Count(running, "\n"), strings.Count(out[len(running):], "\n")
	if limit := 1.2 * ranFor.Seconds(); float64(lines) > limit {
		t.Errorf("%d lines in %v: more than 1.2 a second", lines, ranFor.Round(time.Second))
	}
	if atStop > 17 {
		t.Errorf("%d lines at the stop: more than two windows' and a late line", atStop)
	}
	t.Logf("%d lines in %v, then %d at the stop (%v in all)", lines, ranFor.Round(time.Second), atStop, elapsed.Round(time.Second))
	if strings.Contains(stderr.String(), "\terror\t") {
		t.Errorf("the collector logged errors:\n%s", stderr.String())
	}
}
