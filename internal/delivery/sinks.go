package delivery

import (
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
)

// Sink is one metrics output: the consumer behind a connector's traces->metrics, logs->metrics or
// metrics->metrics instance, or the rest of the metrics pipeline behind the processor.
type Sink struct {
	next  consumer.Metrics
	input int
	// stopped: its instance has shut down, nothing more is sent to it; written under Emitter.mu and
	// sinks.mu, read under either.
	stopped bool
	// After a retryable failure: how long its next delivery waits, and until when (under
	// Emitter.sendMu).
	backoff time.Duration
	retryAt time.Time
}

// sinks is the table of the metrics outputs of one component id. Its lock is the last taken (see
// the component's lock order in doc.go).
type sinks struct {
	mu  sync.Mutex
	all []*Sink
	// anyInput is the input of a sink that takes the results of every signal: the processor's.
	anyInput int
}

func (t *sinks) add(next consumer.Metrics, input int) *Sink {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := &Sink{next: next, input: input}
	t.all = append(t.all, k)
	return k
}

// running returns the running sinks, but except, that take results of input: those fed by the same
// signal (or the processor's), else, when there is none, every running sink.
func (t *sinks) running(input int, except *Sink) []*Sink {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pick(input, func(k *Sink) bool { return !k.stopped && k != except })
}

// pick returns, of the sinks that keep accepts, those that take results of input, else all of them
// (under mu).
func (t *sinks) pick(input int, keep func(*Sink) bool) []*Sink {
	var match, all []*Sink
	for _, k := range t.all {
		if !keep(k) {
			continue
		}
		all = append(all, k)
		if k.input == input || k.input == t.anyInput {
			match = append(match, k)
		}
	}
	if len(match) > 0 {
		return match
	}
	return all
}

// forCheckpoint returns the sink, stopped or not, that a checkpoint keeps results of input for: one
// that takes them, else the first.
func (t *sinks) forCheckpoint(input int) *Sink {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pick(input, func(*Sink) bool { return true })[0]
}

// any reports whether any metrics output was ever registered.
func (t *sinks) any() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.all) > 0
}

// stop marks k stopped (under Emitter.mu).
func (t *sinks) stop(k *Sink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k.stopped = true
}
