package windowaggregator

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// Which records a metrics output takes results for.
const (
	inputSpans = iota
	inputLogs
	inputAny // the processor form in a metrics pipeline

	numInputs = inputAny // the input signals
)

// sink is one metrics output: the consumer behind a connector's traces->metrics or logs->metrics
// instance, or the rest of the metrics pipeline behind the processor.
type sink struct {
	next    consumer.Metrics
	input   int
	stopped bool // its instance has shut down: send nothing more; written under emitter.mu and shared.mu
}

// pendingBatch is a result batch kept for retry after its sink failed.
type pendingBatch struct {
	to     *sink
	md     pmetric.Metrics
	points int
}

// emitter takes results out of the engine, turns them into pdata and sends them to the sinks in
// requests of at most emit.max_points_per_send data points, keeping those that failed with a
// retryable error for the next flush, up to emit.max_pending_points data points.
type emitter struct {
	mu           sync.Mutex
	s            *shared
	builders     [2]*metricsBuilder // per input signal of the aggregation
	queue        []pendingBatch
	queuedPoints int          // of the batches in queue
	queued       atomic.Int64 // len(queue), for the telemetry callback, which must not wait for mu
	// warnedNoOutput: results were dropped because every metrics output had stopped, and logged once
	warnedNoOutput bool
}

func (em *emitter) pendingBatches() int { return int(em.queued.Load()) }

// emit collects what the engine has fired and sends it. From the ingest path it gives way (returns at
// once) when another emission is under way; the ticker and shutdown wait.
func (em *emitter) emit(ctx context.Context, fromIngest bool) {
	if fromIngest {
		if !em.mu.TryLock() {
			return
		}
	} else {
		em.mu.Lock()
	}
	defer em.mu.Unlock()
	em.s.engine.Collect(em.s.engine.Now(), em.add)
	em.sendLocked(ctx)
}

// fireAll fires every open window as it stands and sends the results: shutdown without storage.
func (em *emitter) fireAll(ctx context.Context) {
	em.mu.Lock()
	defer em.mu.Unlock()
	em.s.engine.FireAll(em.add)
	em.sendLocked(ctx)
}

// drain fires the open windows of the aggregations marked in mask as they stand and sends the
// results (see stream.Engine.Drain).
func (em *emitter) drain(ctx context.Context, mask []bool) {
	em.mu.Lock()
	defer em.mu.Unlock()
	em.s.engine.Drain(mask, em.add)
	em.sendLocked(ctx)
}

func (em *emitter) add(r *stream.Result) {
	em.builders[em.s.aggs[r.Agg].input].add(r)
}

// sendLocked retries the queue, then sends what the builders hold.
func (em *emitter) sendLocked(ctx context.Context) {
	s := em.s
	queue := em.queue
	em.queue, em.queuedPoints = nil, 0
	for _, p := range queue {
		em.send(ctx, p.to, p.md, p.points)
	}
	for input, b := range em.builders {
		if b.points == 0 {
			continue
		}
		md, n := b.take()
		targets := s.sinksFor(input)
		if len(targets) == 0 && s.storage != nil && s.hasSinks() {
			// Every metrics output has stopped, and records still came: sent to a stopped output,
			// which with storage keeps them for the checkpoint, to be sent after the next start.
			em.send(ctx, s.checkpointSinkFor(input), md, n)
			continue
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
			continue
		}
		for i, to := range targets {
			out := md
			if i < len(targets)-1 { // every consumer gets data of its own
				out = pmetric.NewMetrics()
				md.CopyTo(out)
			}
			em.send(ctx, to, out, n)
		}
	}
	em.queued.Store(int64(len(em.queue)))
}

// send delivers one batch, in requests of at most emit.max_points_per_send data points (and
// maxSendBytes); after a retryable error the request that failed and those after it are queued.
func (em *emitter) send(ctx context.Context, to *sink, md pmetric.Metrics, points int) {
	s := em.s
	if to.stopped {
		if s.storage != nil { // kept for the checkpoint, and sent after the next start
			em.enqueue(ctx, to, md, points)
			return
		}
		s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(points), reasonAttr("shutdown"))
		return
	}
	parts := requestParts(md, points, s.cfg.Emit.MaxPointsPerSend)
	for i, part := range parts {
		n := points
		if len(parts) > 1 {
			n = part.DataPointCount()
		}
		err := to.next.ConsumeMetrics(ctx, part)
		if err == nil {
			continue
		}
		if consumererror.IsPermanent(err) {
			s.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reasonAttr("permanent"))
			s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(n), reasonAttr("permanent_error"))
			s.logger.Error("Dropping window results: the metrics consumer rejected them permanently", zap.Int("data_points", n), zap.Error(err))
			continue
		}
		s.tel.WindowAggregatorEmitFailures.Add(ctx, 1, reasonAttr("retryable"))
		kept := 0
		for _, rest := range parts[i:] {
			m := n
			if len(parts) > 1 {
				m = rest.DataPointCount()
			}
			em.enqueue(ctx, to, rest, m)
			kept += m
		}
		s.logger.Warn("Window results not delivered; keeping them for the next flush", zap.Int("data_points", kept), zap.Error(err))
		return
	}
}

// enqueue keeps a batch for retry, in parts of at most emit.max_points_per_send data points,
// dropping (and counting) the oldest past emit.max_pending_points.
func (em *emitter) enqueue(ctx context.Context, to *sink, md pmetric.Metrics, points int) {
	s := em.s
	parts := splitMetrics(md, points, s.cfg.Emit.MaxPointsPerSend)
	for _, part := range parts {
		n := points
		if len(parts) > 1 {
			n = part.DataPointCount()
		}
		dropped := 0
		for len(em.queue) > 0 && em.queuedPoints+n > s.cfg.Emit.MaxPendingPoints {
			oldest := em.queue[0]
			em.queue[0] = pendingBatch{}
			em.queue = em.queue[1:]
			em.queuedPoints -= oldest.points
			dropped += oldest.points
		}
		if dropped > 0 {
			s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(dropped), reasonAttr("queue_full"))
			s.logger.Warn("Dropping the oldest window results kept for retry: emit.max_pending_points reached", zap.Int("data_points", dropped))
		}
		em.queue = append(em.queue, pendingBatch{to: to, md: part, points: n})
		em.queuedPoints += n
	}
	em.queued.Store(int64(len(em.queue)))
}

// stopSink makes a final delivery attempt of the sink's queued batches and stops sending to it.
func (em *emitter) stopSink(ctx context.Context, to *sink) {
	em.mu.Lock()
	defer em.mu.Unlock()
	queue := em.queue
	em.queue, em.queuedPoints = nil, 0
	keep := func(p pendingBatch) {
		em.queue = append(em.queue, p)
		em.queuedPoints += p.points
	}
	for _, p := range queue {
		if p.to != to {
			keep(p)
			continue
		}
		if err := to.next.ConsumeMetrics(ctx, p.md); err != nil {
			if em.s.storage != nil {
				keep(p) // saved with the checkpoint, sent after the next start
				continue
			}
			em.s.tel.WindowAggregatorDroppedPoints.Add(ctx, int64(p.points), reasonAttr("shutdown"))
			em.s.logger.Error("Dropping window results at shutdown: the metrics consumer failed", zap.Int("data_points", p.points), zap.Error(err))
		}
	}
	em.s.mu.Lock() // stopped is read under either lock
	to.stopped = true
	em.s.mu.Unlock()
	em.queued.Store(int64(len(em.queue)))
}
