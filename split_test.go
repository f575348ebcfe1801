package windowaggregator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// requestLog records each request's data points and fails the ones its fail function picks.
type requestLog struct {
	mu     sync.Mutex
	sizes  []int
	points []string
	fail   func(n int) error // by request number, from 0
}

func (l *requestLog) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.sizes)
	l.sizes = append(l.sizes, md.DataPointCount())
	if l.fail != nil {
		if err := l.fail(n); err != nil {
			return err
		}
	}
	for _, p := range points([]pmetric.Metrics{md}) {
		l.points = append(l.points, fmt.Sprintf("%+v", p))
	}
	return nil
}

func (l *requestLog) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

// Through the connector: a window's 7 points go out in requests of at most emit.max_points_per_send
// (3, 3, 1); a retryable failure of the second keeps it and the third, which go out at the next
// flush; every point is delivered once.
func TestResultsGoOutInBoundedRequests(t *testing.T) {
	useFakeClock(t)
	run := func(maxPerSend int, fail func(int) error) *requestLog {
		cfg := latencyConfig()
		cfg.Emit.MaxPointsPerSend = maxPerSend
		next := &requestLog{fail: fail}
		h := newConnectorHarnessTo(t, cfg, next)
		h.sendTraces(traces(spanSpec{service: "a", name: "/x", end: 1, ms: 10}, spanSpec{service: "a", name: "/x", end: 2, ms: 30},
			spanSpec{service: "a", name: "/x", end: 11, ms: 1}))
		lookup(t).emit(context.Background(), true) // a retry, past the backoff
		h.shutdown()
		return next
	}
	whole := run(2000, nil) // [0,10) fires, and at shutdown [10,20): 7 points each
	if !slices.Equal(whole.sizes, []int{7, 7}) {
		t.Fatalf("requests without a limit: %v, want 7 and 7", whole.sizes)
	}
	bounded := run(3, nil)
	for _, n := range bounded.sizes {
		if n > 3 {
			t.Fatalf("a request of %d points, over max_points_per_send 3: %v", n, bounded.sizes)
		}
	}
	if !slices.Equal(bounded.sizes, []int{3, 3, 1, 3, 3, 1}) {
		t.Fatalf("bounded requests %v, want 3, 3, 1 per window", bounded.sizes)
	}
	if !slices.Equal(bounded.points, whole.points) {
		t.Fatalf("bounded requests delivered\n%v\nwant\n%v", bounded.points, whole.points)
	}
	failing := run(3, func(n int) error {
		if n == 1 {
			return errors.New("backend busy")
		}
		return nil
	})
	if !slices.Equal(failing.points, whole.points) {
		t.Fatalf("after a failed request, delivered\n%v\nwant\n%v", failing.points, whole.points)
	}
	if !slices.Equal(failing.sizes, []int{3, 3, 3, 1, 3, 3, 1}) {
		t.Fatalf("requests %v: want 3, 3 (failed), then 3 and 1 again, then the next window's 3, 3, 1", failing.sizes)
	}
}
