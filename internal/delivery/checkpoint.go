package delivery

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// What a checkpoint keeps of the queue, and gives back at a restore: the batches waiting for
// delivery, each with the input whose sinks take it. The checkpoint reads and restores them through
// these methods alone.

// Batch is a result batch queued for delivery, as a checkpoint keeps it: the input whose sinks take it
// (Config.Inputs: every input's), and its protobuf encoding.
type Batch struct {
	Input int
	Raw   []byte
}

// Checkpoint calls snapshot under the emitter's lock, so that no collection takes the engine's fired
// results between the snapshot (which holds them) and the queue (which would then hold them too), and
// returns the queued batches with the sequence number below which they are in it (see Checkpointed).
// A batch is encoded once, at the first checkpoint that holds it, which is before it is sent while
// storage is durable; one being sent without (storage was failing) is left out, as encoding it would
// read what its consumer may be changing.
func (em *Emitter) Checkpoint(snapshot func()) (batches []Batch, seq uint64) {
	em.mu.Lock()
	defer em.mu.Unlock()
	snapshot()
	seq = em.nextSeq
	batches = make([]Batch, 0, len(em.queue))
	var m pmetric.ProtoMarshaler
	for i := range em.queue {
		p := &em.queue[i]
		if p.raw == nil {
			if em.hasInFlight && p.md == em.inFlight {
				continue
			}
			raw, err := m.MarshalMetrics(p.md)
			if err != nil { // cannot happen for pdata built here; keep the rest
				continue
			}
			p.raw = raw
		}
		batches = append(batches, Batch{p.to.input, p.raw})
	}
	return batches, seq
}

// Checkpointed releases for delivery the batches queued before seq: a checkpoint that the storage has
// taken holds them.
func (em *Emitter) Checkpointed(seq uint64) {
	em.mu.Lock()
	em.checkpointed = max(em.checkpointed, seq)
	em.mu.Unlock()
	em.WakeDelivery()
}

// Restore queues the batches of a restored checkpoint, each for the first running sink of its input,
// as held by that checkpoint: they go out when the queue reaches them.
func (em *Emitter) Restore(inputs []int, batches []pmetric.Metrics) {
	em.mu.Lock()
	defer em.mu.Unlock()
	for i, md := range batches {
		if to := em.sinks.running(inputs[i], nil); len(to) > 0 {
			em.enqueue(context.Background(), to[0], md, md.DataPointCount())
		}
	}
	em.checkpointed = em.nextSeq
}
