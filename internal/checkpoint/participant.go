package checkpoint

import (
	"context"

	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// A Participant is a part of the component's state that the checkpoint holds as one section: the
// metric inputs, the remembered identities, the emitter's queue and the engine (participants.go).
// The coordinator calls each through this interface alone.
type Participant interface {
	// Capture takes the participant's state at the checkpoint's moment and calls then once it has,
	// still holding what must be held while the participants after it are taken (the emitter's
	// queue holds its lock while the engine is taken). capture calls the participants in the lock
	// order, the ingest gate held for writing; the Section is written out once the gate is let go.
	Capture(then func()) Section
	// Decode reads the participant's section of a checkpoint and returns what puts it in place.
	// Nothing changes before apply is called, so that a checkpoint is restored whole or not at all;
	// but for the engine, which starts empty and is decoded last (see decode).
	Decode(ctx context.Context, in Input) (apply func(), err error)
}

// Input is a participant's section of a checkpoint being restored: its bytes, the checkpoint's format
// version, and the storage's other keys (the identities' parts).
type Input struct {
	Data    []byte
	Version byte
	Get     func(key string) ([]byte, bool)
}

// A Section is a participant's captured state: its bytes in the checkpoint (Len of them), the
// storage operations written in the checkpoint's batch (nil: none), and what follows once the batch
// is taken or fails.
type Section interface {
	Len() int
	AppendTo(b []byte) []byte
	Ops() []*storage.Operation
	Done(saved bool)
}

// bytesSection is a section that is its bytes alone.
type bytesSection []byte

func (s bytesSection) Len() int                 { return len(s) }
func (s bytesSection) AppendTo(b []byte) []byte { return append(b, s...) }
func (bytesSection) Ops() []*storage.Operation  { return nil }
func (bytesSection) Done(bool)                  {}
