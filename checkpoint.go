package windowaggregator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// The checkpoint is one value under one key of the storage client: a magic, a format version, the
// aggregations it was taken with (see fingerprint), the service.instance.id its results carry, the
// engine snapshot (watermark, open windows, fired results not yet collected), the metric inputs'
// streams (see metricinput.Inputs.AppendTo), the directory of the remembered identities (dedup.Mark; empty
// without dedup), the result batches queued for delivery, and a CRC-32C of all that before it, so
// that any damage of up to 32 bits in a row, and most other damage, is detected. The identities
// themselves are parts under keys of their own (idsKey), one a slice of event time, each written when
// it changed and checked against the CRC-32C the directory lists; all of one checkpoint are written
// in one storage batch.
//
// Version 6, which held every identity in the value itself, is still read: its windows, streams and
// queue are restored, and its identities (of a hash this version no longer computes) are dropped,
// logged. A checkpoint of any other version is discarded, logged and counted, like a damaged one.
const (
	checkpointKey     = "window_aggregator.state"
	checkpointMagic   = "WACP"
	checkpointVersion = 7
	// checkpointV6 is the version before the identities were parts of their own
	checkpointV6 = 6
)

// idsKey is the storage key of the part of the remembered identities of slice idx.
func idsKey(idx int64) string { return checkpointKey + ".ids." + strconv.FormatInt(idx, 10) }

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// checkpointer saves and restores the state of component id (its engine, its metric inputs, the
// emitter's queue) through the storage extension its configuration names.
type checkpointer struct {
	id      component.ID
	cfg     *Config
	logger  *zap.Logger
	tel     *telemetry
	engine  *stream.Engine
	inputs  *metricinput.Inputs
	emitter *delivery.Emitter
	// gate is the ingest gate: held for reading by an ingest call of a gated input (one that keeps
	// state outside the engine: a metric input stream, a remembered identity) from its first change
	// of that state until its records are applied (enter, leave), and for writing while a checkpoint
	// captures the state (capture), so that a checkpoint never holds a stream's base without the
	// increase measured from it, or an identity without its record, or the reverse.
	gate  sync.RWMutex
	gated [numInputs]bool
	// dedup is the remembered identities, or nil
	dedup *dedup.Set
	// health hears whether checkpoints succeed
	health *health
	// last is what the operator's view reads of the last save, apart from mu, which a save holds
	// with the ingest gate
	last atomic.Pointer[checkpointStatus]

	mu     sync.Mutex
	client storage.Client
	// ext is the storage extension; while client is nil after a failed open, each save tries to
	// open it again.
	ext storage.Extension
	// isOpen mirrors client != nil, for the emitter, which must not wait for mu.
	isOpen atomic.Bool
	// failing: the last save failed; until one succeeds the state is not durable.
	failing atomic.Bool
	snap    []byte // the engine's last snapshot, whose buffer the next one reuses (under mu)
}

// enter holds the ingest gate for reading for an ingest call of input, if input is gated, and reports
// whether it does; c may be nil (no storage): nothing is gated.
func (c *checkpointer) enter(input int) bool {
	if c == nil || !c.gated[input] {
		return false
	}
	c.gate.RLock()
	return true
}

// leave lets go of the ingest gate that enter took.
func (c *checkpointer) leave() { c.gate.RUnlock() }

// Durable reports whether checkpoints are being written: the emitter's delivery.Durability.
func (c *checkpointer) Durable() bool { return c.isOpen.Load() && !c.failing.Load() }

// start opens the storage client and restores the last checkpoint. A checkpoint that cannot be read is
// logged and counted, and the component starts clean. A storage extension that is missing or of
// another kind fails start (a configuration error); one whose client cannot be opened (a damaged
// file, say) is logged and counted, and the component runs without durable state, trying again at
// each checkpoint.
func (c *checkpointer) start(ctx context.Context, host component.Host) error {
	id := *c.cfg.Storage
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return fmt.Errorf("storage: extension %q is not configured in the service's extensions", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return fmt.Errorf("storage: extension %q is not a storage extension", id)
	}
	c.mu.Lock()
	c.ext = se
	opened := c.open(ctx)
	c.mu.Unlock()
	if opened {
		c.restore(ctx)
	}
	return nil
}

// open opens the storage client (under mu), and reports whether it did; a failure, or a panic of the
// storage's own code on a damaged file, is logged and counted.
func (c *checkpointer) open(ctx context.Context) (ok bool) {
	id := *c.cfg.Storage
	defer func() {
		if p := recover(); p != nil {
			c.openFailed(ctx, fmt.Errorf("panic: %v", p))
			ok = false
		}
	}()
	client, err := c.ext.GetClient(ctx, component.KindProcessor, c.id, "")
	if err != nil {
		c.openFailed(ctx, err)
		return false
	}
	c.client = client
	c.isOpen.Store(true)
	c.logger.Info("Opened the storage for window state checkpoints", zap.String("storage", id.String()))
	return true
}

func (c *checkpointer) openFailed(ctx context.Context, err error) {
	c.health.set(checkpointConcern, fmt.Errorf("cannot open the storage for window state checkpoints: %w", err))
	c.setLast(checkpointStatus{failedAt: time.Now(), err: "cannot open the storage: " + err.Error()})
	c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("open_failed"))
	c.logger.Error("Cannot open the storage for window state checkpoints; running without durable state, trying again at each checkpoint",
		zap.String("storage", c.cfg.Storage.String()), zap.Error(err))
}

func (c *checkpointer) restore(ctx context.Context) {
	data, err := c.client.Get(ctx, checkpointKey)
	switch {
	case err != nil:
		c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("restore_failed"))
		c.logger.Error("Cannot read the window state checkpoint; starting with empty windows", zap.Error(err))
		return
	case len(data) == 0:
		c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("empty"))
		c.logger.Info("No window state checkpoint in storage; starting with empty windows", zap.Bool("zero_length_value", data != nil))
		return
	}
	if err := c.decode(ctx, data); err != nil {
		c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("restore_failed"))
		c.logger.Error("Discarding an unreadable window state checkpoint; starting with empty windows", zap.Error(err))
		return
	}
	c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("restored"))
	c.logger.Info("Restored window state from storage", zap.Int("bytes", len(data)))
}

// fingerprint describes what the state of the aggregations means (names, signals, filters, group_by,
// values, weights, outputs), so that a checkpoint is not restored into another configuration: its
// series keys would be read against other group-by keys, its counts be of other records or weights.
// fmt prints maps with sorted keys, so it is stable.
//
// The histogram's form is left out: the engine's snapshot checks what of it is state (the explicit
// buckets), and an exponential max_size shapes the output only. So are exemplars, which a snapshot
// restores into any number of them.
func (c *checkpointer) fingerprint() string {
	// Where is printed by value: fmt prints a pointer nested in a slice as its address, which would
	// make every configuration with a where clause refuse its own checkpoints after a restart. The
	// weight is the one in effect, so that writing out its default changes nothing.
	type stateFields struct {
		Name    string
		Signal  SignalName
		Where   WhereConfig
		GroupBy []GroupByKey
		Value   ValueConfig
		Unit    Unit
		Weight  Weight
		Outputs []string
	}
	aggs := make([]stateFields, len(c.cfg.Aggregations))
	for i, a := range c.cfg.Aggregations {
		var where WhereConfig
		if a.Where != nil {
			where = *a.Where
		}
		aggs[i] = stateFields{a.Name, a.Signal, where, a.GroupBy, a.Value, a.Unit, a.weight(), a.Outputs}
	}
	return fmt.Sprintf("%+v", aggs)
}

// captured is the state a checkpoint holds, taken at one moment of ingest (capture): the metric
// inputs' part, the remembered identities' mark, the engine's snapshot (in c.snap), and the queued
// batches with the sequence number below which they are in it.
type captured struct {
	inputs  []byte
	mark    *dedup.Mark
	batches []delivery.Batch
	seq     uint64
}

// capture takes the state of every participant at one moment (under mu). Its steps are the
// checkpoint's lock order:
//  1. the ingest gate, for writing: no ingest call is between changing a metric stream's base or
//     remembering an identity and staging its record, which the engine's snapshot would then hold
//     without the other, or the reverse;
//  2. the metric inputs' lock: their streams;
//  3. the remembered identities: the slices that changed are marked, each under its own lock (their
//     identities are copied out after the gate: Mark.Parts);
//  4. the emitter's lock (Emitter.Checkpoint): the engine's snapshot (the engine's own locks), which
//     holds the results fired and not yet collected, then the gate is let go; under the same lock,
//     the queue, so that no collection moves a result from the one to the other between them.
func (c *checkpointer) capture() (cp captured) {
	c.gate.Lock()
	c.inputs.Mu.Lock()
	cp.inputs = c.inputs.AppendTo(nil)
	c.inputs.Mu.Unlock()
	if c.dedup != nil {
		cp.mark = c.dedup.Mark(c.engine.Watermark())
	}
	cp.batches, cp.seq = c.emitter.Checkpoint(func() {
		c.snap = c.engine.Snapshot(c.snap[:0])
		c.gate.Unlock()
	})
	return cp
}

// encode makes a checkpoint (under mu), and returns it with the sequence number below which the
// queued batches are in it. The engine's snapshot goes into a buffer kept from one checkpoint to the
// next, so that encoding grows no buffer and leaves the collector little garbage; the checkpoint
// itself is a new buffer, as a storage client may keep what it is given.
func (c *checkpointer) encode() (data []byte, seq uint64, mark *dedup.Mark) {
	fp := c.fingerprint()
	cp := c.capture()
	inputs, batches, seq, mark := cp.inputs, cp.batches, cp.seq, cp.mark
	var ids []byte
	if mark != nil {
		ids = mark.Directory()
	}
	instance := c.emitter.Instance()
	size := len(checkpointMagic) + 1 + 6*binary.MaxVarintLen64 + len(fp) + len(instance) + len(c.snap) + len(inputs) + len(ids) + crc32.Size
	for _, q := range batches {
		size += 2*binary.MaxVarintLen64 + len(q.Raw)
	}
	b := make([]byte, 0, size)
	b = append(append(b, checkpointMagic...), checkpointVersion)
	b = binary.AppendUvarint(b, uint64(len(fp)))
	b = append(b, fp...)
	b = binary.AppendUvarint(b, uint64(len(instance)))
	b = append(b, instance...)
	b = binary.AppendUvarint(b, uint64(len(c.snap)))
	b = append(b, c.snap...)
	b = binary.AppendUvarint(b, uint64(len(inputs)))
	b = append(b, inputs...)
	b = binary.AppendUvarint(b, uint64(len(ids)))
	b = append(b, ids...)
	b = binary.AppendUvarint(b, uint64(len(batches)))
	for _, q := range batches {
		b = binary.AppendUvarint(b, uint64(q.Input))
		b = binary.AppendUvarint(b, uint64(len(q.Raw)))
		b = append(b, q.Raw...)
	}
	if cap(c.snap) > 4*len(c.snap)+64<<10 { // after a peak of series: let the memory go
		c.snap = nil
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32c)), seq, mark
}

var (
	errCheckpointCorrupt  = errors.New("checkpoint is truncated or corrupt")
	errCheckpointChecksum = errors.New("checkpoint is damaged: its checksum does not match")
)

func (c *checkpointer) decode(ctx context.Context, b []byte) error {
	if len(b) < len(checkpointMagic)+1 || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return errCheckpointCorrupt
	}
	version := b[len(checkpointMagic)]
	if version != checkpointVersion && version != checkpointV6 {
		return fmt.Errorf("checkpoint format version %d, this build reads versions %d and %d", version, checkpointV6, checkpointVersion)
	}
	n := len(b) - 4
	if n < len(checkpointMagic)+1 || binary.LittleEndian.Uint32(b[n:]) != crc32.Checksum(b[:n], crc32c) {
		return errCheckpointChecksum
	}
	b = b[len(checkpointMagic)+1 : n]
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		v := b[w : w+int(n)]
		b = b[w+int(n):]
		return v, true
	}
	fp, ok := next()
	if !ok {
		return errCheckpointCorrupt
	}
	if string(fp) != c.fingerprint() {
		return fmt.Errorf("checkpoint was taken with aggregations %q, now configured: %q", fp, c.fingerprint())
	}
	instance, ok := next()
	if !ok {
		return errCheckpointCorrupt
	}
	snap, ok := next()
	if !ok {
		return errCheckpointCorrupt
	}
	streams, ok := next()
	if !ok {
		return errCheckpointCorrupt
	}
	restoreInputs, err := c.inputs.Decode(streams)
	if err != nil {
		return err
	}
	ids, ok := next()
	if !ok {
		return errCheckpointCorrupt
	}
	restoreIDs, dropped, ofV6 := func() {}, 0, false
	switch {
	case c.dedup == nil || len(ids) == 0: // without dedup now, the identities are of no use
	case version == checkpointV6:
		ofV6 = true
	default:
		dir, err := dedup.DecodeDirectory(ids)
		if err != nil {
			return err
		}
		var sameWidth bool
		restoreIDs, dropped, sameWidth, err = c.dedup.Restore(dir, func(idx int64) ([]byte, bool) {
			part, err := c.client.Get(ctx, idsKey(idx))
			return part, err == nil && part != nil
		})
		if err != nil {
			return err
		}
		if !sameWidth {
			c.logger.Warn("The checkpoint's remembered identities were kept by another window slide; they are forgotten, and copies of records taken before the restart would count again",
				zap.Int("forgotten", dropped))
			dropped = 0
		}
	}
	nq, w := binary.Uvarint(b)
	if w <= 0 || nq > uint64(len(b)) {
		return errCheckpointCorrupt
	}
	b = b[w:]
	var inputs []int
	var batches []pmetric.Metrics
	var u pmetric.ProtoUnmarshaler
	for range nq {
		input, w := binary.Uvarint(b)
		if w <= 0 || input > inputAny {
			return errCheckpointCorrupt
		}
		b = b[w:]
		raw, ok := next()
		if !ok {
			return errCheckpointCorrupt
		}
		md, err := u.UnmarshalMetrics(raw)
		if err != nil {
			return fmt.Errorf("checkpoint: queued results: %w", err)
		}
		inputs, batches = append(inputs, int(input)), append(batches, md)
	}
	if len(b) != 0 {
		return errCheckpointCorrupt
	}
	if err := c.engine.Restore(snap); err != nil {
		return err
	}
	restoreInputs()
	restoreIDs()
	if ofV6 {
		c.logger.Warn("The checkpoint is of format version 6, whose remembered identities this version cannot match: its windows are restored, and copies of records taken before the restart would count again")
	}
	if dropped > 0 {
		c.logger.Warn("The checkpoint remembers more record identities than dedup.max_ids; those past it are forgotten, and their copies would count again",
			zap.Int("forgotten", dropped), zap.Int("max_ids", c.dedup.Max()))
	}
	if id := string(instance); id != "" && id != c.emitter.Instance() {
		// The restored series go on under the id they were written with: another would make them new
		// series in the backend, besides the old ones, until those go stale.
		c.logger.Info("Window results go on under the service.instance.id of the checkpoint, not this collector's",
			zap.String("checkpoint", id), zap.String("collector", c.emitter.Instance()))
		c.emitter.SetInstance(id)
	}
	c.emitter.Restore(inputs, batches)
	return nil
}

// Save writes a checkpoint; a failure is logged and counted, and the next save tries again. The
// batches the checkpoint holds are released for delivery once the storage has taken it. While saves
// fail, the state is not durable: results go out without waiting for a checkpoint, as when storage
// cannot be opened, rather than pile up until the bound drops them.
func (c *checkpointer) Save(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil && (c.ext == nil || !c.open(ctx)) {
		return
	}
	data, seq, mark := c.encode()
	em := c.emitter
	ops, size := []*storage.Operation{storage.SetOperation(checkpointKey, data)}, len(data)
	if mark != nil {
		for _, p := range mark.Parts() {
			ops = append(ops, storage.SetOperation(idsKey(p.Index), p.Data))
			size += len(p.Data)
		}
		for _, idx := range mark.Stale() {
			ops = append(ops, storage.DeleteOperation(idsKey(idx)))
		}
	}
	err := c.client.Batch(ctx, ops...)
	if mark != nil {
		mark.Done(err == nil)
	}
	if err != nil {
		c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("save_failed"))
		c.logger.Error("Cannot save the window state checkpoint; delivering results without one until a save succeeds", zap.Error(err))
		c.health.set(checkpointConcern, fmt.Errorf("cannot save the window state checkpoint: %w", err))
		c.setLast(checkpointStatus{failedAt: time.Now(), err: err.Error()})
		c.failing.Store(true)
		em.WakeDelivery()
		return
	}
	c.failing.Store(false)
	c.health.set(checkpointConcern, nil)
	c.setLast(checkpointStatus{savedAt: time.Now(), bytes: size})
	c.tel.WindowAggregatorCheckpoints.Add(ctx, 1, reasonAttr("saved"))
	em.Checkpointed(seq)
}

func (c *checkpointer) shutdown(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ext = nil // no more opens
	if c.client == nil {
		return nil
	}
	err := c.client.Close(ctx)
	c.client = nil
	c.isOpen.Store(false)
	return err
}

// checkpointStatus is the outcome of the last save: when the last one succeeded and its size, and
// the error of a failure since.
type checkpointStatus struct {
	savedAt  time.Time
	bytes    int
	failedAt time.Time
	err      string
}

// setLast records a save's outcome, keeping the last success's time and size across failures.
func (c *checkpointer) setLast(st checkpointStatus) {
	if prev := c.last.Load(); prev != nil && st.savedAt.IsZero() {
		st.savedAt, st.bytes = prev.savedAt, prev.bytes
	}
	c.last.Store(&st)
}
