package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"

	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// The participants: what each part of the state does to be captured and restored.

// engineParticipant is the engine: its snapshot (watermark, open windows, fired results not yet
// collected), into a buffer kept from one checkpoint to the next, so that encoding grows no buffer and
// leaves the collector little garbage.
type engineParticipant struct {
	e    *stream.Engine
	snap []byte
}

func (p *engineParticipant) Capture(then func()) Section {
	p.snap = p.e.Snapshot(p.snap[:0])
	then()
	return (*engineSection)(p)
}

// Decode puts the snapshot in place at once: the engine has not ingested anything, and an error
// leaves it empty and usable.
func (p *engineParticipant) Decode(_ context.Context, in Input) (func(), error) {
	return func() {}, p.e.Restore(in.Data)
}

type engineSection engineParticipant

func (s *engineSection) Len() int { return len(s.snap) }

func (s *engineSection) AppendTo(b []byte) []byte {
	b = append(b, s.snap...)
	if cap(s.snap) > 4*len(s.snap)+64<<10 { // after a peak of series: let the memory go
		s.snap = nil
	}
	return b
}
func (*engineSection) Ops() []*storage.Operation { return nil }
func (*engineSection) Done(bool)                 {}

// inputsParticipant is the metric inputs' streams (metricinput.Inputs.AppendTo), under their lock.
type inputsParticipant struct{ in *metricinput.Inputs }

func (p inputsParticipant) Capture(then func()) Section {
	p.in.Mu.Lock()
	b := p.in.AppendTo(nil)
	p.in.Mu.Unlock()
	then()
	return bytesSection(b)
}

func (p inputsParticipant) Decode(_ context.Context, in Input) (func(), error) {
	return p.in.Decode(in.Data)
}

// identitiesParticipant is the remembered identities: the checkpoint holds their directory, and
// each slice that changed is a part of its own written in the checkpoint's batch (IDsKey). The slices
// that changed are marked under the gate; their identities are copied out after it (Mark.Parts).
type identitiesParticipant struct {
	set       *dedup.Set
	watermark func() int64
	logger    *zap.Logger
}

func (p identitiesParticipant) Capture(then func()) Section {
	m := p.set.Mark(p.watermark())
	then()
	return &markSection{m: m}
}

// Decode reads the directory and the parts it lists. A checkpoint of version 6 held identities of a
// hash this version no longer computes: they are dropped, logged.
func (p identitiesParticipant) Decode(_ context.Context, in Input) (func(), error) {
	switch {
	case len(in.Data) == 0:
		return func() {}, nil
	case in.Version == VersionV6:
		return func() {
			p.logger.Warn("The checkpoint is of format version 6, whose remembered identities this version cannot match: its windows are restored, and copies of records taken before the restart would count again")
		}, nil
	}
	dir, err := dedup.DecodeDirectory(in.Data)
	if err != nil {
		return nil, err
	}
	restore, dropped, sameWidth, err := p.set.Restore(dir, func(idx int64) ([]byte, bool) { return in.Get(IDsKey(idx)) })
	if err != nil {
		return nil, err
	}
	return func() {
		restore()
		switch {
		case !sameWidth:
			p.logger.Warn("The checkpoint's remembered identities were kept by another window slide; they are forgotten, and copies of records taken before the restart would count again",
				zap.Int("forgotten", dropped))
		case dropped > 0:
			p.logger.Warn("The checkpoint remembers more record identities than dedup.max_ids; those past it are forgotten, and their copies would count again",
				zap.Int("forgotten", dropped), zap.Int("max_ids", p.set.Max()))
		}
	}, nil
}

type markSection struct {
	m   *dedup.Mark
	dir []byte
}

func (s *markSection) Len() int {
	if s.dir == nil {
		s.dir = s.m.Directory()
	}
	return len(s.dir)
}

func (s *markSection) AppendTo(b []byte) []byte {
	s.Len()
	return append(b, s.dir...)
}

func (s *markSection) Ops() []*storage.Operation {
	var ops []*storage.Operation
	for _, p := range s.m.Parts() {
		ops = append(ops, storage.SetOperation(IDsKey(p.Index), p.Data))
	}
	for _, idx := range s.m.Stale() {
		ops = append(ops, storage.DeleteOperation(IDsKey(idx)))
	}
	return ops
}

func (s *markSection) Done(saved bool) { s.m.Done(saved) }

// noIdentities stands for the identities without dedup: an empty section, and a checkpoint's
// identities are of no use.
type noIdentities struct{}

func (noIdentities) Capture(then func()) Section { then(); return bytesSection(nil) }
func (noIdentities) Decode(context.Context, Input) (func(), error) {
	return func() {}, nil
}

// queueParticipant is the emitter's queue: the result batches queued for delivery, each with the
// input whose sinks take it, taken under the emitter's lock (delivery.Emitter.Checkpoint), which
// the participants after it are taken under. Its section is the checkpoint's last: a count, then
// each batch's input and its protobuf encoding.
type queueParticipant struct {
	em       *delivery.Emitter
	maxInput int
}

func (p queueParticipant) Capture(then func()) Section {
	batches, seq := p.em.Checkpoint(then)
	return &queueSection{em: p.em, batches: batches, seq: seq}
}

func (p queueParticipant) Decode(_ context.Context, in Input) (func(), error) {
	b := in.Data
	nq, w := binary.Uvarint(b)
	if w <= 0 || nq > uint64(len(b)) {
		return nil, errCheckpointCorrupt
	}
	b = b[w:]
	var inputs []int
	var batches []pmetric.Metrics
	var u pmetric.ProtoUnmarshaler
	for range nq {
		input, w := binary.Uvarint(b)
		if w <= 0 || input > uint64(p.maxInput) {
			return nil, errCheckpointCorrupt
		}
		b = b[w:]
		var raw []byte
		var ok bool
		if raw, b, ok = next(b); !ok {
			return nil, errCheckpointCorrupt
		}
		md, err := u.UnmarshalMetrics(raw)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: queued results: %w", err)
		}
		inputs, batches = append(inputs, int(input)), append(batches, md)
	}
	if len(b) != 0 {
		return nil, errCheckpointCorrupt
	}
	return func() { p.em.Restore(inputs, batches) }, nil
}

// queueSection is the queue as a checkpoint took it, with the sequence number below which its
// batches are in it: saved, they are released for delivery (see delivery.Emitter.Checkpointed);
// otherwise delivery goes on without waiting for a checkpoint.
type queueSection struct {
	em      *delivery.Emitter
	batches []delivery.Batch
	seq     uint64
}

func (s *queueSection) Len() int {
	n := uvarintLen(uint64(len(s.batches)))
	for _, q := range s.batches {
		n += uvarintLen(uint64(q.Input)) + uvarintLen(uint64(len(q.Raw))) + len(q.Raw)
	}
	return n
}

// uvarintLen is the length of x's uvarint encoding.
func uvarintLen(x uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], x)
}

func (s *queueSection) AppendTo(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s.batches)))
	for _, q := range s.batches {
		b = binary.AppendUvarint(b, uint64(q.Input))
		b = binary.AppendUvarint(b, uint64(len(q.Raw)))
		b = append(b, q.Raw...)
	}
	return b
}

func (*queueSection) Ops() []*storage.Operation { return nil }

func (s *queueSection) Done(saved bool) {
	if saved {
		s.em.Checkpointed(s.seq)
	} else {
		s.em.WakeDelivery()
	}
}

// next reads a length-prefixed field of b, and returns it with what follows.
func next(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, b, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}
