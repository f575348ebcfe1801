package delivery

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metadata"
)

// Results is where the emitter takes results from: the engine.
type Results interface {
	Now() int64
	Collect(now int64, fn func(*stream.Result))
	FireAll(fn func(*stream.Result))
	Drain(aggs []bool, fn func(*stream.Result))
}

// Durability is the component's checkpoint, as the emitter sees it: with it, a result goes out only
// once a checkpoint holds it (see Emitter.Checkpoint and Checkpointed). The emitter never asks for a
// checkpoint: the component takes one when Collect reports that something fired.
type Durability interface {
	// Durable reports whether checkpoints are being written; while they are not (the storage could
	// not be opened, or saves fail), results go out without waiting for one.
	Durable() bool
}

// Config is how results leave the component.
type Config struct {
	// Interval is the least backoff after a retryable failure (doubling up to maxBackoff).
	Interval time.Duration
	// MaxPendingPoints bounds the data points queued; past it the oldest are dropped.
	MaxPendingPoints int
	// MaxPointsPerSend bounds the data points of one request.
	MaxPointsPerSend int
	// Temporality is that of the additive outputs; Version the instrumentation scope's version.
	Temporality pmetric.AggregationTemporality
	Version     string
	// Inputs is the number of input signals; a sink of input Inputs takes the results of all of them
	// (the processor's).
	Inputs int
}

// pendingBatch is a result batch queued for delivery to one sink.
type pendingBatch struct {
	to     *Sink
	md     pmetric.Metrics
	points int
	seq    uint64 // in queueing order; see Emitter.checkpointed
	raw    []byte // its encoding, made by the first checkpoint that holds it (under mu)
}

// Emitter takes results out of the engine, turns them into pdata and queues them for the sinks,
// within Config.MaxPendingPoints data points, in requests of at most Config.MaxPointsPerSend data
// points; a delivery sends the queue, outside the lock that collecting takes, so that a slow or
// stalled consumer delays results and never the collection, nor the ingest path, which only asks for
// a collection (Poke). A request that fails with a retryable error keeps its place in the queue and
// is tried again after a backoff.
type Emitter struct {
	mu         sync.Mutex
	cfg        Config
	aggs       []*Aggregation
	results    Results
	durability Durability // nil: no storage
	tel        *metadata.TelemetryBuilder
	logger     *zap.Logger
	sinks      sinks
	builders   []*builder // by the input signal of the aggregation
	// instance is the service.instance.id that output resources carry (see SetInstance)
	instance string
	// byAgg are the attributes of the counters of one aggregation: its name
	byAgg        [][]metric.AddOption
	queue        []pendingBatch
	queuedPoints int          // of the batches in queue
	queued       atomic.Int64 // queuedPoints, for the telemetry callback, which must not wait for mu
	// warnedNoOutput: results were dropped because every metrics output had stopped, and logged once
	warnedNoOutput bool
	// dropped is why results were last dropped for want of room, not yet reported to health, and
	// behind whether results were dropped since the queue was last empty (under mu); health hears
	// how deliveries go (see SetHealth), one report at a time under healthMu.
	dropped  error
	behind   bool
	health   func(error)
	healthMu sync.Mutex
	// dropped points since the start, and the last delivery error, for the operator's view
	droppedTotal atomic.Int64
	lastErr      atomic.Pointer[string]
	failing      atomic.Bool // the last delivery reported failed

	// sendMu is held by whoever delivers: one delivery at a time, taken before mu.
	sendMu sync.Mutex
	// collectMu makes a collection whole, its checkpoint included: a collection that comes meanwhile
	// (the component's goroutine and a shutting-down output both collect) waits for it, rather than
	// find nothing due while the other's results still wait for their checkpoint.
	collectMu sync.Mutex
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
	observe          func(*stream.Result) // nil: none (see SetObserver)
}

const maxBackoff = 30 * time.Second

// New returns the emitter of aggs' results, taken from results.
func New(cfg Config, aggs []*Aggregation, results Results, tel *metadata.TelemetryBuilder, logger *zap.Logger) *Emitter {
	em := &Emitter{cfg: cfg, aggs: aggs, results: results, tel: tel, logger: logger, sinks: sinks{anyInput: cfg.Inputs},
		wake: make(chan struct{}, 1), deliver: make(chan struct{}, 1)}
	em.background, em.cancelBackground = context.WithCancel(context.Background())
	for range cfg.Inputs {
		em.builders = append(em.builders, newBuilder(aggs, cfg.Version, cfg.Temporality, cfg.MaxPointsPerSend))
	}
	for _, a := range aggs {
		em.byAgg = append(em.byAgg, []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", a.Name)))})
	}
	return em
}

// SetHealth makes health hear, outside mu, how deliveries go: an error when results are dropped
// for want of room (the metrics consumers take them too slowly, or not at all), or a request is not
// delivered (a retryable error) or rejected for good; nil when a pass delivers a request with none
// of those, no sink waiting out a backoff, and the queue empty since the last drop. Before the
// component runs.
func (em *Emitter) SetHealth(health func(error)) { em.health = health }

// countDropped counts n result points dropped, and why.
func (em *Emitter) countDropped(ctx context.Context, n int, why string) {
	em.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(n), reason(why))
	em.droppedTotal.Add(int64(n))
}

// Dropped returns the result points dropped since the start, and the last delivery error ("" for
// none).
func (em *Emitter) Dropped() (points int64, lastErr string) {
	if e := em.lastErr.Load(); e != nil {
		lastErr = *e
	}
	return em.droppedTotal.Load(), lastErr
}

// Failing reports whether the last delivery reported failed: results are being dropped or held.
func (em *Emitter) Failing() bool { return em.failing.Load() }

// reportHealth tells health err, if it listens, and keeps an error for the operator's view.
func (em *Emitter) reportHealth(err error) {
	em.failing.Store(err != nil)
	if err != nil {
		msg := err.Error()
		em.lastErr.Store(&msg)
	}
	if em.health != nil {
		em.health(err)
	}
}

// takeDropped returns why results were dropped since it was last asked, if they were (under mu).
func (em *Emitter) takeDropped() error {
	err := em.dropped
	em.dropped = nil
	return err
}

// SetObserver makes observe see, under mu, every result the emitter takes from the engine, before
// it is built into data points: the operator's view keeps the last values of the series it is asked
// about. Before the component runs.
func (em *Emitter) SetObserver(observe func(*stream.Result)) { em.observe = observe }

// SetDurability makes d the checkpoint the emitter's results wait for: before the component runs.
func (em *Emitter) SetDurability(d Durability) { em.durability = d }

// SetInstance sets the service.instance.id that output resources carry: at creation, and at a
// restore, before the component's goroutines run.
func (em *Emitter) SetInstance(id string) {
	em.instance = id
	for _, b := range em.builders {
		b.instance = id
	}
}

// Instance returns the service.instance.id that output resources carry; "" for none.
func (em *Emitter) Instance() string { return em.instance }

// AddSink registers a metrics output taking the results of input (Config.Inputs: of every input).
func (em *Emitter) AddSink(next consumer.Metrics, input int) *Sink { return em.sinks.add(next, input) }

// HasSinks reports whether any metrics output was ever registered.
func (em *Emitter) HasSinks() bool { return em.sinks.any() }

// TakenElsewhere reports whether a running metrics output other than leaving takes results of input.
func (em *Emitter) TakenElsewhere(input int, leaving *Sink) bool {
	return len(em.sinks.running(input, leaving)) > 0
}

// HoldsAny reports whether some queued batch waits for a checkpoint.
func (em *Emitter) HoldsAny() bool {
	em.mu.Lock()
	defer em.mu.Unlock()
	return len(em.queue) > 0 && em.held(em.queue[len(em.queue)-1])
}

// held reports whether batch p must wait for a checkpoint before it is delivered (under mu).
func (em *Emitter) held(p pendingBatch) bool {
	return em.durability != nil && em.durability.Durable() && p.seq >= em.checkpointed
}

// Pending returns the data points waiting for delivery.
func (em *Emitter) Pending() int { return int(em.queued.Load()) }

// Poke asks the component's goroutine for a collection, without waiting: the ingest path.
func (em *Emitter) Poke() {
	select {
	case em.wake <- struct{}{}:
	default:
	}
}

// Wake is where the component's goroutine hears Poke.
func (em *Emitter) Wake() <-chan struct{} { return em.wake }

// Collect takes what the engine has fired into the queue, wakes the delivery goroutine, and reports
// whether anything fired.
//
// With storage, what fired is delivered only once a checkpoint holds it (see held), with the windows
// it came from marked fired: after a crash the restart sends those results again as they were, and never
// fires their windows again with other values (a cumulative total never goes back). The caller takes
// that checkpoint when Collect reports a firing.
func (em *Emitter) Collect(ctx context.Context) (fired bool) {
	em.collectMu.Lock()
	defer em.collectMu.Unlock()
	em.mu.Lock()
	em.results.Collect(em.results.Now(), func(r *stream.Result) {
		fired = true
		em.add(r)
	})
	em.queueBuilt(ctx)
	em.mu.Unlock()
	em.reportDrops()
	em.WakeDelivery()
	return fired
}

// WakeDelivery asks the delivery goroutine to send what it can.
func (em *Emitter) WakeDelivery() {
	select {
	case em.deliver <- struct{}{}:
	default:
	}
}

// FireAll fires every open window as it stands and delivers the results: shutdown without storage.
func (em *Emitter) FireAll(ctx context.Context) {
	em.mu.Lock()
	em.results.FireAll(em.add)
	em.queueBuilt(ctx)
	em.mu.Unlock()
	em.Send(ctx, true)
}

// Drain fires the open windows of the aggregations marked in mask as they stand and delivers the
// results (see stream.Engine.Drain).
func (em *Emitter) Drain(ctx context.Context, mask []bool) {
	em.mu.Lock()
	em.results.Drain(mask, em.add)
	em.queueBuilt(ctx)
	em.mu.Unlock()
	em.Send(ctx, true)
}

func (em *Emitter) add(r *stream.Result) {
	if em.observe != nil {
		em.observe(r)
	}
	em.builders[em.aggs[r.Agg].Input].add(r)
}

// queueBuilt queues what the builders hold for the sinks that take it (under mu).
func (em *Emitter) queueBuilt(ctx context.Context) {
	for input, b := range em.builders {
		for _, built := range b.take() {
			em.queueBatch(ctx, input, built.md, built.points)
		}
		b.takeSaturated(func(agg int, n int64) {
			em.tel.WindowAggregatorSaturatedPoints.Add(ctx, n, em.byAgg[agg]...)
		})
	}
}

// queueBatch queues one built batch of input's results for the sinks that take it (under mu).
func (em *Emitter) queueBatch(ctx context.Context, input int, md pmetric.Metrics, n int) {
	targets := em.sinks.running(input, nil)
	if len(targets) == 0 && em.durability != nil && em.sinks.any() {
		// Every metrics output has stopped, and records still came: kept for a stopped output,
		// which with storage goes into the checkpoint, to be sent after the next start.
		em.enqueue(ctx, em.sinks.forCheckpoint(input), md, n)
		return
	}
	if len(targets) == 0 {
		why := "no_metrics_pipeline"
		if em.sinks.any() {
			why = "shutdown" // every metrics output has shut down
			if !em.warnedNoOutput {
				em.warnedNoOutput = true
				em.logger.Warn("Dropping window results: every metrics output of the component has shut down, and records still came to another instance of it (the processor form's metrics pipeline can stop before its traces and logs pipelines; the connector form, or storage, keeps such results)",
					zap.Int("data_points", n))
			}
		}
		em.countDropped(ctx, n, why)
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

// Send delivers the queue's requests in order, outside mu: a request to a stopped sink stays (with
// storage, for the checkpoint) or is dropped; after a retryable error, that sink's requests wait for
// its backoff, unless force, and the other sinks' go on. It waits for a delivery under way.
func (em *Emitter) Send(ctx context.Context, force bool) {
	em.sendMu.Lock()
	defer em.sendMu.Unlock()
	delivered, err := em.send(ctx, force)
	em.healthMu.Lock()
	defer em.healthMu.Unlock()
	em.mu.Lock()
	if dropped := em.takeDropped(); dropped != nil {
		err = dropped
	}
	if len(em.queue) == 0 {
		em.behind = false
	}
	healthy := !em.behind && !em.backingOff()
	em.mu.Unlock()
	switch {
	case err != nil:
		em.reportHealth(err)
	case delivered && healthy:
		em.reportHealth(nil)
	}
}

// reportDrops reports results dropped for want of room since the last report, if any.
func (em *Emitter) reportDrops() {
	em.healthMu.Lock()
	defer em.healthMu.Unlock()
	em.mu.Lock()
	dropped := em.takeDropped()
	em.mu.Unlock()
	if dropped != nil {
		em.reportHealth(dropped)
	}
}

// backingOff reports whether a queued request's sink waits out a backoff after a failure (under mu).
func (em *Emitter) backingOff() bool {
	for _, p := range em.queue {
		if p.to.backoff > 0 {
			return true
		}
	}
	return false
}

// send is Send's pass (under sendMu): whether a request was delivered, and the error of the last
// that was not.
func (em *Emitter) send(ctx context.Context, force bool) (delivered bool, failure error) {
	now := time.Now()
	var failed []*Sink // failed in this pass: their later requests wait
	for skip := 0; ; {
		em.mu.Lock()
		if skip >= len(em.queue) {
			em.mu.Unlock()
			return delivered, failure
		}
		p := em.queue[skip]
		if em.held(p) {
			em.mu.Unlock()
			return delivered, failure // this and what follows wait for the next checkpoint
		}
		if p.to.stopped {
			if em.durability != nil {
				skip++ // kept for the checkpoint
			} else {
				em.remove(skip)
				em.countDropped(ctx, p.points, "shutdown")
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
			delivered = true
		case consumererror.IsPermanent(err):
			em.removeBatch(p)
			em.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reason("permanent"))
			em.countDropped(ctx, p.points, "permanent_error")
			em.logger.Error("Dropping window results: the metrics consumer rejected them permanently", zap.Int("data_points", p.points), zap.Error(err))
			failure = fmt.Errorf("dropped %d window result data points: the metrics consumer rejected them permanently: %w", p.points, err)
		default:
			failure = fmt.Errorf("window results not delivered, kept and retried after a backoff: %w", err)
			em.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reason("retryable"))
			p.to.backoff = min(max(2*p.to.backoff, em.cfg.Interval), maxBackoff)
			p.to.retryAt = time.Now().Add(p.to.backoff)
			em.logger.Warn("Window results not delivered; keeping them, retrying after a backoff", zap.Int("data_points", p.points),
				zap.Duration("backoff", p.to.backoff), zap.Error(err))
			failed = append(failed, p.to)
			skip++
		}
		em.mu.Unlock()
	}
}

// remove takes batch i out of the queue (under mu).
func (em *Emitter) remove(i int) {
	em.queuedPoints -= em.queue[i].points
	em.queue = append(em.queue[:i], em.queue[i+1:]...)
	em.queued.Store(int64(em.queuedPoints))
}

// removeBatch takes p out of the queue if it is still there (under mu): the bound may have dropped it
// while it was being sent.
func (em *Emitter) removeBatch(p pendingBatch) {
	for i, q := range em.queue {
		if q.md == p.md {
			em.remove(i)
			return
		}
	}
}

// enqueue queues a batch in requests of at most Config.MaxPointsPerSend data points and
// maxSendBytes, dropping (and counting) the oldest past Config.MaxPendingPoints (under mu).
func (em *Emitter) enqueue(ctx context.Context, to *Sink, md pmetric.Metrics, points int) {
	for _, part := range requestParts(md, points, em.cfg.MaxPointsPerSend) {
		n := part.points
		dropped := 0
		for em.queuedPoints+n > em.cfg.MaxPendingPoints {
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
			em.countDropped(ctx, dropped, "queue_full")
			em.logger.Warn("Dropping the oldest window results kept for delivery: emit.max_pending_points reached", zap.Int("data_points", dropped))
			em.behind = true
			em.dropped = fmt.Errorf("dropped %d window result data points: emit.max_pending_points reached, the metrics consumers do not take them as fast as they fire", dropped)
		}
		em.queue = append(em.queue, pendingBatch{to: to, md: part.md, points: n, seq: em.nextSeq})
		em.nextSeq++
		em.queuedPoints += n
	}
	em.queued.Store(int64(em.queuedPoints))
}

// Run delivers what is queued whenever a collection wakes it, until stop: the delivery goroutine.
func (em *Emitter) Run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-em.deliver:
			em.Send(em.background, false)
		}
	}
}

// StopSink makes a final delivery attempt of the sink's queued batches, outside mu, and stops
// sending to it. With durable storage, batches no checkpoint holds yet stay, for the checkpoint.
func (em *Emitter) StopSink(ctx context.Context, to *Sink) {
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
			if em.durability != nil {
				failed = append(failed, p) // saved with the checkpoint, sent after the next start
				continue
			}
			em.countDropped(ctx, p.points, "shutdown")
			em.logger.Error("Dropping window results at shutdown: the metrics consumer failed", zap.Int("data_points", p.points), zap.Error(err))
		}
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	for _, p := range failed {
		em.queue = append(em.queue, p)
		em.queuedPoints += p.points
	}
	em.sinks.stop(to)
	em.queued.Store(int64(em.queuedPoints))
}

// reason is a counter's reason attribute.
func reason(r string) metric.AddOption {
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r)))
}
