package windowaggregator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// sink is one metrics output: the consumer behind a connector's traces->metrics or logs->metrics
// instance, or the rest of the metrics pipeline behind the processor.
type sink struct {
	next    consumer.Metrics
	input   int
	stopped bool // its instance has shut down: send nothing more; written under emitter.mu and shared.mu
	// After a retryable failure: how long its next delivery waits, and until when (under sendMu).
	backoff time.Duration
	retryAt time.Time
}

// pendingBatch is a result batch queued for delivery to one sink.
type pendingBatch struct {
	to     *sink
	md     pmetric.Metrics
	points int
	seq    uint64 // in queueing order; see emitter.checkpointed
	raw    []byte // its encoding, made by the first checkpoint that holds it (under mu)
}

// emitter takes results out of the engine, turns them into pdata and queues them for the sinks,
// within emit.max_pending_points data points, in requests of at most emit.max_points_per_send data
// points; a delivery sends the queue, outside the lock that collecting takes, so that a slow or
// stalled consumer delays results and never the collection, nor the ingest path, which only asks for
// a collection (poke). A request that fails with a retryable error keeps its place in the queue and
// is tried again after a backoff.
type emitter struct {
	mu           sync.Mutex
	s            *shared
	builders     [numInputs]*metricsBuilder // by the input signal of the aggregation
	queue        []pendingBatch
	queuedPoints int          // of the batches in queue
	queued       atomic.Int64 // queuedPoints, for the telemetry callback, which must not wait for mu
	// warnedNoOutput: results were dropped because every metrics output had stopped, and logged once
	warnedNoOutput bool

	// sendMu is held by whoever delivers: one delivery at a time, taken before mu.
	sendMu sync.Mutex
	// inFlight is the request being sent (under mu): the bound drops others, not it.
	inFlight    pmetric.Metrics
	hasInFlight bool

	// With durable storage, a batch is delivered only once a checkpoint holds it: those with seq below
	// checkpointed (set once the storage has taken the checkpoint, under mu).
	nextSeq, checkpointed uint64

	wake    chan struct{} // a collection is due (ingest); capacity 1
	deliver chan struct{} // the queue has work for the delivery goroutine; capacity 1
	// background is the delivery goroutine's context, cancelled once shutdown begins: from then on
	// deliveries run in the shutdown path, under its caller's context.
	background       context.Context
	cancelBackground context.CancelFunc
}

const maxBackoff = 30 * time.Second

func newEmitter(s *shared) *emitter {
	em := &emitter{s: s, wake: make(chan struct{}, 1), deliver: make(chan struct{}, 1)}
	em.background, em.cancelBackground = context.WithCancel(context.Background())
	return em
}

// holdsAny reports whether some queued batch waits for a checkpoint.
func (em *emitter) holdsAny() bool {
	em.mu.Lock()
	defer em.mu.Unlock()
	return len(em.queue) > 0 && em.held(em.queue[len(em.queue)-1])
}

// held reports whether batch p must wait for a checkpoint before it is delivered (under mu).
func (em *emitter) held(p pendingBatch) bool {
	return em.s.storage != nil && em.s.storage.durable() && p.seq >= em.checkpointed
}

func (em *emitter) pendingPoints() int { return int(em.queued.Load()) }

// poke asks the component's goroutine for a collection, without waiting: the ingest path.
func (em *emitter) poke() {
	select {
	case em.wake <- struct{}{}:
	default:
	}
}

// collect takes what the engine has fired into the queue, and wakes the delivery goroutine.
//
// With storage, what fired is delivered only once a checkpoint holds it (see held), with the windows
// it came from marked fired: after a crash the restart sends those results again as they were, and never
// fires their windows again with other values (a cumulative total never goes back).
func (em *emitter) collect(ctx context.Context) {
	em.mu.Lock()
	fired := 0
	em.s.engine.Collect(em.s.engine.Now(), func(r *stream.Result) {
		fired++
		em.add(r)
	})
	em.queueBuilt(ctx)
	em.mu.Unlock()
	if fired > 0 && em.s.storage != nil {
		em.s.storage.save(ctx)
	}
	em.wakeDelivery()
}

func (em *emitter) wakeDelivery() {
	select {
	case em.deliver <- struct{}{}:
	default:
	}
}

// fireAll fires every open window as it stands and delivers the results: shutdown without storage.
func (em *emitter) fireAll(ctx context.Context) {
	em.mu.Lock()
	em.s.engine.FireAll(em.add)
	em.queueBuilt(ctx)
	em.mu.Unlock()
	em.send(ctx, true)
}

// drain fires the open windows of the aggregations marked in mask as they stand and delivers the
// results (see stream.Engine.Drain).
func (em *emitter) drain(ctx context.Context, mask []bool) {
	em.mu.Lock()
	em.s.engine.Drain(mask, em.add)
	em.queueBuilt(ctx)
	em.mu.Unlock()
	em.send(ctx, true)
}

func (em *emitter) add(r *stream.Result) {
	em.builders[em.s.aggs[r.Agg].signal.input].add(r)
}

// queueBuilt queues what the builders hold for the sinks that take it (under mu).
func (em *emitter) queueBuilt(ctx context.Context) {
	for input, b := range em.builders {
		for _, built := range b.take() {
			em.queueBatch(ctx, input, built.md, built.points)
		}
		b.takeSaturated(func(agg int, n int64) {
			em.s.tel.WindowAggregatorSaturatedPoints.Add(ctx, n, em.s.aggs[agg].aggregationOption...)
		})
	}
}

// queueBatch queues one built batch of input's results for the sinks that take it (under mu).
func (em *emitter) queueBatch(ctx context.Context, input int, md pmetric.Metrics, n int) {
	s := em.s
	targets := s.sinksFor(input)
	if len(targets) == 0 && s.storage != nil && s.hasSinks() {
		// Every metrics output has stopped, and records still came: kept for a stopped output,
		// which with storage goes into the checkpoint, to be sent after the next start.
		em.enqueue(ctx, s.checkpointSinkFor(input), md, n)
		return
	}
	if len(targets) == 0 {
		reason := "no_metrics_pipeline"
		if s.hasSinks() {
			reason = "shutdown" // every metrics output has shut down
			if !em.warnedNoOutput {
				em.warnedNoOutput = true
				s.logger.Warn("Dropping window results: every metrics output of the component has shut down, and records still came to another instance of it (the processor form's metrics pipeline can stop before its traces and logs pipelines; the connector form, or storage, keeps such results)",
					zap.Int("data_points", n))
			}
		}
		s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(n), reasonAttr(reason))
		return
	}
	for i, to := range targets {
		out := md
		if i < len(targets)-1 { // every consumer gets data of its own
			out = pmetric.NewMetrics()
			md.CopyTo(out)
		}
		em.enqueue(ctx, to, out, n)
	}
}

// send delivers the queue's requests in order, outside mu: a request to a stopped sink stays (with
// storage, for the checkpoint) or is dropped; after a retryable error, that sink's requests wait for
// its backoff, unless force, and the other sinks' go on. It waits for a delivery under way.
func (em *emitter) send(ctx context.Context, force bool) {
	em.sendMu.Lock()
	defer em.sendMu.Unlock()
	s := em.s
	now := time.Now()
	var failed []*sink // failed in this pass: their later requests wait
	for skip := 0; ; {
		em.mu.Lock()
		if skip >= len(em.queue) {
			em.mu.Unlock()
			return
		}
		p := em.queue[skip]
		if em.held(p) {
			em.mu.Unlock()
			return // this and what follows wait for the next checkpoint
		}
		if p.to.stopped {
			if s.storage != nil {
				skip++ // kept for the checkpoint
			} else {
				em.remove(skip)
				s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(p.points), reasonAttr("shutdown"))
			}
			em.mu.Unlock()
			continue
		}
		if (!force && now.Before(p.to.retryAt)) || slices.Contains(failed, p.to) {
			skip++ // its sink is in backoff
			em.mu.Unlock()
			continue
		}
		em.inFlight, em.hasInFlight = p.md, true
		em.mu.Unlock()
		err := p.to.next.ConsumeMetrics(ctx, p.md)
		em.mu.Lock()
		em.hasInFlight = false
		switch {
		case err == nil:
			em.removeBatch(p)
			p.to.backoff, p.to.retryAt = 0, time.Time{}
		case consumererror.IsPermanent(err):
			em.removeBatch(p)
			s.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reasonAttr("permanent"))
			s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(p.points), reasonAttr("permanent_error"))
			s.logger.Error("Dropping window results: the metrics consumer rejected them permanently", zap.Int("data_points", p.points), zap.Error(err))
		default:
			s.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reasonAttr("retryable"))
			p.to.backoff = min(max(2*p.to.backoff, s.cfg.Emit.Interval), maxBackoff)
			p.to.retryAt = time.Now().Add(p.to.backoff)
			s.logger.Warn("Window results not delivered; keeping them, retrying after a backoff", zap.Int("data_points", p.points),
				zap.Duration("backoff", p.to.backoff), zap.Error(err))
			failed = append(failed, p.to)
			skip++
		}
		em.mu.Unlock()
	}
}

// remove takes batch i out of the queue (under mu).
func (em *emitter) remove(i int) {
	em.queuedPoints -= em.queue[i].points
	em.queue = append(em.queue[:i], em.queue[i+1:]...)
	em.queued.Store(int64(em.queuedPoints))
}

// removeBatch takes p out of the queue if it is still there (under mu): the bound may have dropped it
// while it was being sent.
func (em *emitter) removeBatch(p pendingBatch) {
	for i, q := range em.queue {
		if q.md == p.md {
			em.remove(i)
			return
		}
	}
}

// enqueue queues a batch in requests of at most emit.max_points_per_send data points and
// maxSendBytes, dropping (and counting) the oldest past emit.max_pending_points (under mu).
func (em *emitter) enqueue(ctx context.Context, to *sink, md pmetric.Metrics, points int) {
	s := em.s
	for _, part := range requestParts(md, points, s.cfg.Emit.MaxPointsPerSend) {
		n := part.points
		dropped := 0
		for em.queuedPoints+n > s.cfg.Emit.MaxPendingPoints {
			i := 0 // the oldest, but the one being sent
			if i < len(em.queue) && em.hasInFlight && em.queue[i].md == em.inFlight {
				i++
			}
			if i >= len(em.queue) {
				break
			}
			dropped += em.queue[i].points
			em.remove(i)
		}
		if dropped > 0 {
			s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(dropped), reasonAttr("queue_full"))
			s.logger.Warn("Dropping the oldest window results kept for delivery: emit.max_pending_points reached", zap.Int("data_points", dropped))
		}
		em.queue = append(em.queue, pendingBatch{to: to, md: part.md, points: n, seq: em.nextSeq})
		em.nextSeq++
		em.queuedPoints += n
	}
	em.queued.Store(int64(em.queuedPoints))
}

// deliveryLoop delivers what is queued whenever collect wakes it, until stop.
func (em *emitter) deliveryLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-em.deliver:
			em.send(em.background, false)
		}
	}
}

// stopSink makes a final delivery attempt of the sink's queued batches, outside mu, and stops
// sending to it. With durable storage, batches no checkpoint holds yet stay, for the checkpoint.
func (em *emitter) stopSink(ctx context.Context, to *sink) {
	em.cancelBackground() // shutdown has begun: no delivery waits on a context nothing cancels
	em.sendMu.Lock()      // after the delivery under way
	defer em.sendMu.Unlock()
	em.mu.Lock()
	var mine []pendingBatch
	kept := em.queue[:0]
	for _, p := range em.queue {
		if p.to == to && !em.held(p) {
			mine = append(mine, p)
			em.queuedPoints -= p.points
			continue
		}
		kept = append(kept, p)
	}
	em.queue = kept
	em.mu.Unlock()
	var failed []pendingBatch
	for _, p := range mine {
		if err := to.next.ConsumeMetrics(ctx, p.md); err != nil {
			if em.s.storage != nil {
				failed = append(failed, p) // saved with the checkpoint, sent after the next start
				continue
			}
			em.s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(p.points), reasonAttr("shutdown"))
			em.s.logger.Error("Dropping window results at shutdown: the metrics consumer failed", zap.Int("data_points", p.points), zap.Error(err))
		}
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	for _, p := range failed {
		em.queue = append(em.queue, p)
		em.queuedPoints += p.points
	}
	em.s.mu.Lock() // stopped is read under either lock
	to.stopped = true
	em.s.mu.Unlock()
	em.queued.Store(int64(em.queuedPoints))
}
