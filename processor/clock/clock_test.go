package clock

import (
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
