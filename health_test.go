package windowaggregator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
)

// statusHost is a host that takes the component's status reports, as the collector's does, and
// hands them over one by one.
type statusHost struct {
	component.Host
	events chan *componentstatus.Event
}

func newStatusHost(h component.Host) *statusHost {
	return &statusHost{Host: h, events: make(chan *componentstatus.Event, 100)}
}

func (h *statusHost) Report(ev *componentstatus.Event) { h.events <- ev }

// next returns the next status reported, or fails the test after a while without one.
func (h *statusHost) next(t *testing.T) *componentstatus.Event {
	t.Helper()
	select {
	case ev := <-h.events:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no status reported")
		return nil
	}
}

// none checks that nothing more was reported.
func (h *statusHost) none(t *testing.T) {
	t.Helper()
	select {
	case ev := <-h.events:
		t.Fatalf("status %v reported (%v), want none", ev.Status(), ev.Err())
	default:
	}
}

func wantStatus(t *testing.T, ev *componentstatus.Event, want componentstatus.Status, errHas string) {
	t.Helper()
	if ev.Status() != want {
		t.Fatalf("status %v (%v), want %v", ev.Status(), ev.Err(), want)
	}
	if errHas != "" && (ev.Err() == nil || !strings.Contains(ev.Err().Error(), errHas)) {
		t.Fatalf("status %v with error %v, want one that says %q", ev.Status(), ev.Err(), errHas)
	}
}

// A metrics consumer that hangs until results are dropped for want of room makes the component
// report a recoverable error that says so; once the consumer takes results again, OK. Each window
// of the one series fires 7 points, and emit.max_pending_points keeps two windows' worth, the one
// being sent included: the first window's request hangs, the second waits, and the third window's
// points drop the second's.
func TestHealthFollowsDelivery(t *testing.T) {
	useFakeClock(t)
	cfg := latencyConfig()
	cfg.Emit.MaxPendingPoints, cfg.Emit.MaxPointsPerSend = 14, 7
	hang := newHangingMetrics()
	host := newStatusHost(componenttest.NewNopHost())
	set := connectortest.NewNopSettings(Type)
	c, err := NewConnectorFactory().CreateTracesToMetrics(testContext(t), set, cfg, hang)
	must(t, err)
	must(t, c.Start(context.Background(), host))
	send := func(window int) { // closes the window before it
		must(t, c.ConsumeTraces(context.Background(), traces(spanSpec{service: "a", name: "/x", end: float64(10*window + 1), ms: 1})))
	}
	send(0)
	send(1)
	<-hang.entered // [0,10)'s request is in, and hangs
	em := lookup(t).emitter
	send(2)
	em.Collect(context.Background()) // what the component's goroutine does on its own
	host.none(t)                     // [10,20) waits beside the request that hangs
	send(3)
	em.Collect(context.Background())
	wantStatus(t, host.next(t), componentstatus.StatusRecoverableError, "emit.max_pending_points")
	if em := viewOf(t).Emission; em.DroppedPoints != 7 || em.QueuedPoints != 14 || !strings.Contains(em.LastError, "emit.max_pending_points") || !em.Failing {
		t.Fatalf("the view's emission: %+v, want 7 dropped, 14 queued, the drop's error, failing", em)
	}
	close(hang.release)
	wantStatus(t, host.next(t), componentstatus.StatusOK, "")
	if em := viewOf(t).Emission; em.Failing || !strings.Contains(em.LastError, "emit.max_pending_points") {
		t.Fatalf("the view's emission once delivered again: %+v, want not failing, the last error kept", em)
	}
	must(t, c.Shutdown(context.Background()))
	host.none(t) // shutting down, the collector reports the status
}

// A checkpoint that cannot be saved makes the component report a recoverable error naming the
// storage's error; the next save that succeeds, OK. A save fails again after a success: reported
// again.
func TestHealthFollowsCheckpoints(t *testing.T) {
	useFakeClock(t)
	st := &memStorage{data: map[string][]byte{}}
	cfg := latencyConfig()
	cfg.Storage = &storageID
	cfg.Checkpoint.Interval = 0
	host := newStatusHost(hostWith{storageID: st})
	h := newHarnessOn(t, cfg, false, new(consumertest.MetricsSink), host)
	failSaves := func(err error) {
		st.mu.Lock()
		st.failSet = err
		st.mu.Unlock()
	}
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 1}))
	host.none(t)
	failSaves(errors.New("disk full"))
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 16, ms: 1})) // [0,10) fires: a save
	// Every instance's host hears it: the traces->metrics and logs->metrics instances share the host.
	for range 2 {
		wantStatus(t, host.next(t), componentstatus.StatusRecoverableError, "disk full")
	}
	failSaves(nil)
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 26, ms: 1})) // [10,20) fires, saved
	for range 2 {
		wantStatus(t, host.next(t), componentstatus.StatusOK, "")
	}
	host.none(t)
	ck := viewOf(t).Checkpoint
	if ck == nil || ck.Last == nil || ck.Bytes == 0 || ck.Error != "" {
		t.Fatalf("the view's checkpoint after a save: %+v, want its time and size, no error", ck)
	}
	failSaves(errors.New("disk full"))
	h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 36, ms: 1}))
	for range 2 {
		wantStatus(t, host.next(t), componentstatus.StatusRecoverableError, "cannot save the window state checkpoint: disk full")
	}
	if after := viewOf(t).Checkpoint; after.Last == nil || !after.Last.Equal(*ck.Last) || !strings.Contains(after.Error, "disk full") {
		t.Fatalf("the view's checkpoint after a failed save: %+v, want the last save's time and the error", after)
	}
}

// viewOf is the operator's view of the test's component id.
func viewOf(t *testing.T) view.ComponentView {
	t.Helper()
	id := lookup(t).id.String()
	for _, v := range view.Views(10) {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("%s is not in the view", id)
	return view.ComponentView{}
}

// drain returns the statuses reported so far.
func (h *statusHost) drain() []componentstatus.Status {
	var got []componentstatus.Status
	for {
		select {
		case ev := <-h.events:
			got = append(got, ev.Status())
		default:
			return got
		}
	}
}

// Two metrics pipelines take the processor's results; one consumer fails. While it does, the other's
// deliveries do not report OK: the failing one's results wait out its backoff. Once it takes them
// again, OK.
func TestHealthWaitsForEveryOutput(t *testing.T) {
	useFakeClock(t)
	cfg := latencyConfig()
	failing := &flakyMetrics{err: errors.New("backend down")}
	working := new(consumertest.MetricsSink)
	host := newStatusHost(componenttest.NewNopHost())
	ctx := testContext(t)
	set := processortest.NewNopSettings(Type)
	var comps []component.Component
	for _, next := range []consumer.Metrics{failing, working} {
		m, err := NewFactory().CreateMetrics(ctx, set, cfg, next)
		must(t, err)
		comps = append(comps, m)
	}
	p, err := NewFactory().CreateTraces(ctx, set, cfg, consumertest.NewNop())
	must(t, err)
	comps = append(comps, p)
	for _, c := range comps {
		must(t, c.Start(ctx, host))
	}
	st := lookup(t)
	for w := range 4 { // each batch closes the window before it
		must(t, p.ConsumeTraces(ctx, traces(spanSpec{service: "a", name: "/x", end: float64(10*w + 1), ms: 1})))
		st.emit(ctx, false)
	}
	if len(working.AllMetrics()) == 0 {
		t.Fatal("the working consumer got nothing")
	}
	got := host.drain()
	if !slices.Contains(got, componentstatus.StatusRecoverableError) || slices.Contains(got, componentstatus.StatusOK) {
		t.Fatalf("statuses while one consumer fails: %v, want recoverable errors and no OK", got)
	}
	failing.setErr(nil)
	st.emit(ctx, true)
	for ev := host.next(t); ev.Status() != componentstatus.StatusOK; ev = host.next(t) {
		wantStatus(t, ev, componentstatus.StatusRecoverableError, "backend down")
	}
	for _, c := range comps {
		must(t, c.Shutdown(ctx))
	}
}

// The health of two concerns: each failure reported with every concern still failing named; when
// one of two recovers, the other alone; OK when both have; a host that starts while one fails hears
// of it at once.
func TestHealthOfTwoConcerns(t *testing.T) {
	var h health
	first := newStatusHost(componenttest.NewNopHost())
	h.watch(first)
	h.set(deliveryConcern, nil)
	first.none(t) // nothing had failed
	h.set(deliveryConcern, errors.New("backend down"))
	wantStatus(t, first.next(t), componentstatus.StatusRecoverableError, "backend down")
	h.set(checkpointConcern, errors.New("disk full"))
	ev := first.next(t)
	wantStatus(t, ev, componentstatus.StatusRecoverableError, "backend down")
	wantStatus(t, ev, componentstatus.StatusRecoverableError, "disk full")
	late := newStatusHost(componenttest.NewNopHost())
	h.watch(late)
	wantStatus(t, late.next(t), componentstatus.StatusRecoverableError, "disk full")
	h.set(deliveryConcern, nil)
	for _, host := range []*statusHost{first, late} {
		ev := host.next(t)
		wantStatus(t, ev, componentstatus.StatusRecoverableError, "disk full")
		if strings.Contains(ev.Err().Error(), "backend down") {
			t.Fatalf("%v still names the concern that recovered", ev.Err())
		}
	}
	h.set(checkpointConcern, nil)
	wantStatus(t, first.next(t), componentstatus.StatusOK, "")
	wantStatus(t, late.next(t), componentstatus.StatusOK, "")
	h.set(checkpointConcern, nil)
	first.none(t)
}
