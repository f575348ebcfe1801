package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	f := NewFake(start)
	if got := f.Now(); got != start.UnixNano() {
		t.Fatalf("Now = %d, want %d", got, start.UnixNano())
	}
	if got := f.Advance(1500 * time.Millisecond); got != start.UnixNano()+1_500_000_000 {
		t.Fatalf("Advance returned %d", got)
	}
	f.Set(time.Unix(5, 0))
	if got := f.Now(); got != 5_000_000_000 {
		t.Fatalf("after Set, Now = %d", got)
	}
}

func TestSystemIsNearTimeNow(t *testing.T) {
	before := time.Now().UnixNano()
	got := System{}.Now()
	after := time.Now().UnixNano()
	if got < before || got > after {
		t.Fatalf("System.Now = %d, outside [%d, %d]", got, before, after)
	}
}

// A clock passed in through the context is the one FromContext returns; without one, the system's.
func TestClockFromContext(t *testing.T) {
	if _, ok := FromContext(context.Background()).(System); !ok {
		t.Fatal("no clock in the context: want the system clock")
	}
	f := NewFake(time.Unix(42, 0))
	if got := FromContext(NewContext(context.Background(), f)); got != Clock(f) || got.Now() != 42e9 {
		t.Fatalf("got %v, want the fake clock at 42 s", got)
	}
}
