// Package checkpoint is the component's checkpoint: its format, and the coordinator that owns the
// ingest gate, captures every participant's state at one moment, saves it and restores it.
package checkpoint

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
)

// Checkpointer is the component's checkpoint coordinator: it owns the ingest gate, captures the
// state of every participant at one moment of ingest (capture: the metric inputs, the remembered
// identities, the emitter's queue and the engine), through one interface (Participant), saves it
// through the storage extension the configuration names, and restores it at start.
type Checkpointer struct {
	id          component.ID
	storage     component.ID
	fingerprint string
	maxInput    int
	logger      *zap.Logger
	counted     func(ctx context.Context, reason string)
	setHealth   func(error)
	emitter     *delivery.Emitter
	// The participants, in the checkpoint's order of sections (see capture for the order they are
	// taken in): identities is noIdentities without dedup.
	engine, inputs, identities, queue Participant
	// gate is the ingest gate: held for reading by an ingest call of a gated input (one that keeps
	// state outside the engine: a metric input stream, a remembered identity) from its first change
	// of that state until its records are applied (Enter, Leave), and for writing while a checkpoint
	// captures the state (capture), so that a checkpoint never holds a stream's base without the
	// increase measured from it, or an identity without its record, or the reverse.
	gate  sync.RWMutex
	gated []bool
	// last is what the operator's view reads of the last save, apart from mu, which a save holds
	// with the ingest gate
	last atomic.Pointer[Status]

	mu     sync.Mutex
	client storage.Client
	// ext is the storage extension; while client is nil after a failed open, each save tries to
	// open it again.
	ext storage.Extension
	// isOpen mirrors client != nil, for the emitter, which must not wait for mu.
	isOpen atomic.Bool
	// failing: the last save failed; until one succeeds the state is not durable.
	failing atomic.Bool
}

// Options are what a Checkpointer is made of.
type Options struct {
	ID      component.ID // the component's
	Storage component.ID // the storage extension's
	// Fingerprint describes what the state of the aggregations means: a checkpoint taken with
	// another is not restored.
	Fingerprint string
	// Gated says, by input (a signal's index), whether its ingest calls keep state outside the engine
	// and so take the ingest gate; MaxInput is the greatest input a queued batch may name.
	Gated    []bool
	MaxInput int
	Logger   *zap.Logger
	// Counted counts a checkpoint outcome (saved, save_failed, restored, ...); SetHealth hears
	// whether checkpoints succeed (nil: they do).
	Counted   func(ctx context.Context, reason string)
	SetHealth func(error)
	// The participants: Dedup may be nil.
	Engine  *stream.Engine
	Inputs  *metricinput.Inputs
	Dedup   *dedup.Set
	Emitter *delivery.Emitter
}

// New returns the coordinator of o's participants.
func New(o Options) *Checkpointer {
	c := &Checkpointer{id: o.ID, storage: o.Storage, fingerprint: o.Fingerprint, maxInput: o.MaxInput,
		gated: o.Gated, logger: o.Logger, counted: o.Counted, setHealth: o.SetHealth, emitter: o.Emitter,
		engine: &engineParticipant{e: o.Engine}, inputs: inputsParticipant{o.Inputs}, identities: noIdentities{},
		queue: queueParticipant{em: o.Emitter, maxInput: o.MaxInput}}
	if o.Dedup != nil {
		c.identities = identitiesParticipant{set: o.Dedup, watermark: o.Engine.Watermark, logger: o.Logger}
	}
	return c
}

// Enter holds the ingest gate for reading for an ingest call of input, if input is gated, and
// reports whether it does; c may be nil (no storage): nothing is gated.
func (c *Checkpointer) Enter(input int) bool {
	if c == nil || !c.gated[input] {
		return false
	}
	c.gate.RLock()
	return true
}

// Leave lets go of the ingest gate that Enter took.
func (c *Checkpointer) Leave() { c.gate.RUnlock() }

// Last returns the outcome of the last save, nil before any.
func (c *Checkpointer) Last() *Status { return c.last.Load() }

// Wait returns once a save under way, if any, has ended.
func (c *Checkpointer) Wait() {
	c.mu.Lock()
	c.mu.Unlock() //nolint:staticcheck // waiting for it, not guarding anything
}

// Restore restores the checkpoint data, reading its identities' parts from client: what Start does
// with what the storage holds, returning the error that Start logs and counts.
func (c *Checkpointer) Restore(ctx context.Context, client storage.Client, data []byte) error {
	c.mu.Lock()
	c.client = client
	c.mu.Unlock()
	return c.decode(ctx, data)
}

// Durable reports whether checkpoints are being written: the emitter's delivery.Durability.
func (c *Checkpointer) Durable() bool { return c.isOpen.Load() && !c.failing.Load() }

// Start opens the storage client and restores the last checkpoint. A checkpoint that cannot be read is
// logged and counted, and the component starts clean. A storage extension that is missing or of
// another kind fails start (a configuration error); one whose client cannot be opened (a damaged
// file, say) is logged and counted, and the component runs without durable state, trying again at
// each checkpoint.
func (c *Checkpointer) Start(ctx context.Context, host component.Host) error {
	id := c.storage
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
func (c *Checkpointer) open(ctx context.Context) (ok bool) {
	id := c.storage
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

func (c *Checkpointer) openFailed(ctx context.Context, err error) {
	c.setHealth(fmt.Errorf("cannot open the storage for window state checkpoints: %w", err))
	c.setLast(Status{FailedAt: time.Now(), Err: "cannot open the storage: " + err.Error()})
	c.counted(ctx, "open_failed")
	c.logger.Error("Cannot open the storage for window state checkpoints; running without durable state, trying again at each checkpoint",
		zap.String("storage", c.storage.String()), zap.Error(err))
}

func (c *Checkpointer) restore(ctx context.Context) {
	data, err := c.client.Get(ctx, Key)
	switch {
	case err != nil:
		c.counted(ctx, "restore_failed")
		c.logger.Error("Cannot read the window state checkpoint; starting with empty windows", zap.Error(err))
		return
	case len(data) == 0:
		c.counted(ctx, "empty")
		c.logger.Info("No window state checkpoint in storage; starting with empty windows", zap.Bool("zero_length_value", data != nil))
		return
	}
	if err := c.decode(ctx, data); err != nil {
		c.counted(ctx, "restore_failed")
		c.logger.Error("Discarding an unreadable window state checkpoint; starting with empty windows", zap.Error(err))
		return
	}
	c.counted(ctx, "restored")
	c.logger.Info("Restored window state from storage", zap.Int("bytes", len(data)))
}

// capture takes the state of every participant at one moment (under mu), in the checkpoint's lock
// order, each taken inside the one before it (Participant.Capture):
//  1. the ingest gate, for writing: no ingest call is between changing a metric stream's base or
//     remembering an identity and staging its record, which the engine's snapshot would then hold
//     without the other, or the reverse;
//  2. the metric inputs, under their lock;
//  3. the remembered identities: the slices that changed are marked, each under its own lock;
//  4. the emitter's queue, under the emitter's lock, inside which
//  5. the engine's snapshot (the engine's own locks), which holds the results fired and not yet
//     collected, then the gate is let go: no collection moves a result from the engine to the queue
//     between the two.
func (c *Checkpointer) capture() (engine, inputs, identities, queue Section) {
	c.gate.Lock()
	inputs = c.inputs.Capture(func() {
		identities = c.identities.Capture(func() {
			queue = c.queue.Capture(func() {
				engine = c.engine.Capture(c.gate.Unlock)
			})
		})
	})
	return engine, inputs, identities, queue
}

// encode makes a checkpoint (under mu), and returns it with the participants' sections, whose
// storage operations go in the checkpoint's batch. The checkpoint is a new buffer, as a storage
// client may keep what it is given.
func (c *Checkpointer) encode() (data []byte, sections []Section) {
	fp, instance := c.fingerprint, c.emitter.Instance()
	engine, inputs, identities, queue := c.capture()
	sections = []Section{engine, inputs, identities, queue}
	prefixed := sections[:3] // the last, the queue, runs to the checksum
	size := len(Magic) + 1 + 2*binary.MaxVarintLen64 + len(fp) + len(instance) + queue.Len() + crc32.Size
	for _, sec := range prefixed {
		size += binary.MaxVarintLen64 + sec.Len()
	}
	b := make([]byte, 0, size)
	b = append(append(b, Magic...), Version)
	b = binary.AppendUvarint(b, uint64(len(fp)))
	b = append(b, fp...)
	b = binary.AppendUvarint(b, uint64(len(instance)))
	b = append(b, instance...)
	for _, sec := range prefixed {
		b = binary.AppendUvarint(b, uint64(sec.Len()))
		b = sec.AppendTo(b)
	}
	b = queue.AppendTo(b)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, CRC32C)), sections
}

// decode reads a checkpoint and puts it in place, whole or not at all: every participant's section
// is read first, the engine's last (it is put in place as it is read), then the others are put in
// place.
func (c *Checkpointer) decode(ctx context.Context, b []byte) error {
	if len(b) < len(Magic)+1 || string(b[:len(Magic)]) != Magic {
		return errCheckpointCorrupt
	}
	version := b[len(Magic)]
	if version != Version && version != VersionV6 {
		return fmt.Errorf("checkpoint format version %d, this build reads versions %d and %d", version, VersionV6, Version)
	}
	n := len(b) - 4
	if n < len(Magic)+1 || binary.LittleEndian.Uint32(b[n:]) != crc32.Checksum(b[:n], CRC32C) {
		return errCheckpointChecksum
	}
	b = b[len(Magic)+1 : n]
	var fields [5][]byte // fingerprint, instance, engine, inputs, identities
	for i := range fields {
		var ok bool
		if fields[i], b, ok = next(b); !ok {
			return errCheckpointCorrupt
		}
		if i == 0 && string(fields[0]) != c.fingerprint {
			return fmt.Errorf("checkpoint was taken with aggregations %q, now configured: %q", fields[0], c.fingerprint)
		}
	}
	get := func(key string) ([]byte, bool) {
		v, err := c.client.Get(ctx, key)
		return v, err == nil && v != nil
	}
	var apply []func()
	for _, p := range []struct {
		Participant
		data []byte
	}{{c.inputs, fields[3]}, {c.identities, fields[4]}, {c.queue, b}, {c.engine, fields[2]}} {
		put, err := p.Decode(ctx, Input{Data: p.data, Version: version, Get: get})
		if err != nil {
			return err
		}
		apply = append(apply, put)
	}
	if id := string(fields[1]); id != "" && id != c.emitter.Instance() {
		// The restored series go on under the id they were written with: another would make them new
		// series in the backend, besides the old ones, until those go stale.
		c.logger.Info("Window results go on under the service.instance.id of the checkpoint, not this collector's",
			zap.String("checkpoint", id), zap.String("collector", c.emitter.Instance()))
		c.emitter.SetInstance(id)
	}
	for _, put := range apply {
		put()
	}
	return nil
}

// Save writes a checkpoint; a failure is logged and counted, and the next save tries again. The
// batches the checkpoint holds are released for delivery once the storage has taken it. While saves
// fail, the state is not durable: results go out without waiting for a checkpoint, as when storage
// cannot be opened, rather than pile up until the bound drops them.
func (c *Checkpointer) Save(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil && (c.ext == nil || !c.open(ctx)) {
		return
	}
	data, sections := c.encode()
	ops, size := []*storage.Operation{storage.SetOperation(Key, data)}, len(data)
	for _, sec := range sections {
		for _, op := range sec.Ops() {
			ops = append(ops, op)
			size += len(op.Value)
		}
	}
	err := c.client.Batch(ctx, ops...)
	if err != nil {
		c.counted(ctx, "save_failed")
		c.logger.Error("Cannot save the window state checkpoint; delivering results without one until a save succeeds", zap.Error(err))
		c.setHealth(fmt.Errorf("cannot save the window state checkpoint: %w", err))
		c.setLast(Status{FailedAt: time.Now(), Err: err.Error()})
	} else {
		c.setHealth(nil)
		c.setLast(Status{SavedAt: time.Now(), Bytes: size})
		c.counted(ctx, "saved")
	}
	// What the sections' Done wakes delivery to reads Durable(): failing is set first.
	c.failing.Store(err != nil)
	for _, sec := range sections {
		sec.Done(err == nil)
	}
}

// Shutdown closes the storage client; no save opens it again.
func (c *Checkpointer) Shutdown(ctx context.Context) error {
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

// Status is the outcome of the last save: when the last one succeeded and its size, and
// the error of a failure since.
type Status struct {
	SavedAt  time.Time
	Bytes    int
	FailedAt time.Time
	Err      string
}

// setLast records a save's outcome, keeping the last success's time and size across failures.
func (c *Checkpointer) setLast(st Status) {
	if prev := c.last.Load(); prev != nil && st.SavedAt.IsZero() {
		st.SavedAt, st.Bytes = prev.SavedAt, prev.Bytes
	}
	c.last.Store(&st)
}
