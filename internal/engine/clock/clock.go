// Package clock gives the engine its notion of wall-clock time, as Unix nanoseconds, so that tests
// can drive time by hand instead of sleeping.
package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock reads the wall clock in Unix nanoseconds.
type Clock interface {
	Now() int64
}

type contextKey struct{}

// NewContext returns ctx carrying c: a component created with it reads its wall clock from c.
func NewContext(ctx context.Context, c Clock) context.Context {
	return context.WithValue(ctx, contextKey{}, c)
}

// FromContext returns the clock ctx carries, or the system clock.
func FromContext(ctx context.Context) Clock {
	if c, ok := ctx.Value(contextKey{}).(Clock); ok && c != nil {
		return c
	}
	return System{}
}

// System is the real wall clock.
type System struct{}

// Now returns time.Now() in Unix nanoseconds.
func (System) Now() int64 { return time.Now().UnixNano() }

// Fake is a clock that moves only when told to. It is safe for concurrent use.
type Fake struct {
	now atomic.Int64
}

// NewFake returns a fake clock reading t.
func NewFake(t time.Time) *Fake {
	f := &Fake{}
	f.now.Store(t.UnixNano())
	return f
}

// Now returns the fake clock's reading.
func (f *Fake) Now() int64 { return f.now.Load() }

// Set moves the fake clock to t.
func (f *Fake) Set(t time.Time) { f.now.Store(t.UnixNano()) }

// Advance moves the fake clock forward by d and returns the new reading.
func (f *Fake) Advance(d time.Duration) int64 { return f.now.Add(int64(d)) }
