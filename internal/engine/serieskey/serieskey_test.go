package serieskey

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestRoundTripKeepsTypesAndSources(t *testing.T) {
	var b Builder
	b.Str(Record, "GET")
	b.Absent()
	b.Int(Resource, -42)
	b.Double(Scope, 2.5)
	b.Bool(Record, true)
	b.Bytes(Resource, []byte{0, 1, 2})
	b.Str(Record, "")
	want := []Value{
		{Kind: Str, Source: Record, Str: "GET"},
		{Kind: absent},
		{Kind: Int, Source: Resource, Int: -42},
		{Kind: Double, Source: Scope, Double: 2.5},
		{Kind: Bool, Source: Record, Bool: true},
		{Kind: Bytes, Source: Resource, Str: "\x00\x01\x02"},
		{Kind: Str, Source: Record, Str: ""},
	}
	var got []Value
	if err := Decode(string(b.Key()), func(i int, v Value) {
		if i != len(got) {
			t.Fatalf("position %d, want %d", i, len(got))
		}
		got = append(got, v)
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("decoded %d values, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDistinctValuesGiveDistinctKeys(t *testing.T) {
	keys := map[string]string{}
	add := func(name string, build func(b *Builder)) {
		var b Builder
		build(&b)
		if prev, ok := keys[string(b.Key())]; ok {
			t.Fatalf("%s and %s encode to the same key", name, prev)
		}
		keys[string(b.Key())] = name
	}
	add("str 1", func(b *Builder) { b.Str(Record, "1") })
	add("int 1", func(b *Builder) { b.Int(Record, 1) })
	add("double 1", func(b *Builder) { b.Double(Record, 1) })
	add("bool true", func(b *Builder) { b.Bool(Record, true) })
	add("str 1 from resource", func(b *Builder) { b.Str(Resource, "1") })
	add("absent", func(b *Builder) { b.Absent() })
	add("ab,c", func(b *Builder) { b.Str(Record, "ab"); b.Str(Record, "c") })
	add("a,bc", func(b *Builder) { b.Str(Record, "a"); b.Str(Record, "bc") })
	add("empty", func(b *Builder) {})
}

// Strings shorter than 128 bytes take a one-byte length, longer ones the shortest uvarint; the lengths
// around those edges round-trip.
func TestStrLengthsAroundTheOneByteLength(t *testing.T) {
	lengthBytes := map[int]int{0: 1, 1: 1, 127: 1, 128: 2, 255: 2, 300: 2, 16383: 2, 16384: 3, 70000: 3}
	for n, lb := range lengthBytes {
		var b Builder
		v := strings.Repeat("x", n)
		b.Str(Scope, v)
		b.Int(Record, 7) // an entry after it, read from where the string ends
		// tag, length, the bytes; then the int's tag and its one-byte varint
		if want := 1 + lb + n + 2; len(b.Key()) != want {
			t.Fatalf("length %d: key of %d bytes, want %d", n, len(b.Key()), want)
		}
		var got []Value
		if err := Decode(string(b.Key()), func(_ int, x Value) { got = append(got, x) }); err != nil {
			t.Fatalf("length %d: %v", n, err)
		}
		if len(got) != 2 || got[0] != (Value{Kind: Str, Source: Scope, Str: v}) || got[1] != (Value{Kind: Int, Int: 7}) {
			desc := make([]string, len(got))
			for i, x := range got {
				desc[i] = fmt.Sprintf("{kind %v source %v, %d-byte string, int %d}", x.Kind, x.Source, len(x.Str), x.Int)
			}
			t.Fatalf("length %d: decoded %v", n, desc)
		}
	}
}

func TestBuilderReuseDoesNotAllocate(t *testing.T) {
	var b Builder
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset()
		b.Str(Record, "checkout")
		b.Int(Resource, 200)
		b.Double(Record, math.Pi)
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per key", allocs)
	}
}

func TestDecodeRejectsCorruptKeys(t *testing.T) {
	for _, k := range []string{"\x01\x05ab", "\x02", "\x03\x00", "\x04\x02", "\x0f", "\x31", "\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"} {
		if err := Decode(k, func(int, Value) {}); err == nil {
			t.Errorf("Decode(%q) accepted a corrupt key", k)
		}
	}
}

func FuzzDecode(f *testing.F) {
	var b Builder
	b.Str(Record, "x")
	b.Int(Scope, 7)
	f.Add(string(b.Key()))
	f.Add("")
	f.Fuzz(func(t *testing.T, key string) {
		var re Builder
		if err := Decode(key, func(_ int, v Value) {
			switch v.Kind {
			case absent:
				re.Absent()
			case Str:
				re.Str(v.Source, v.Str)
			case Bytes:
				re.Bytes(v.Source, []byte(v.Str))
			case Int:
				re.Int(v.Source, v.Int)
			case Double:
				re.Double(v.Source, v.Double)
			case Bool:
				re.Bool(v.Source, v.Bool)
			}
		}); err != nil {
			return
		}
		// A key that decodes re-encodes to the same value sequence; decode it again to compare.
		var a, c []Value
		_ = Decode(key, func(_ int, v Value) { a = append(a, v) })
		if err := Decode(string(re.Key()), func(_ int, v Value) { c = append(c, v) }); err != nil || len(a) != len(c) {
			t.Fatalf("re-encoded key does not decode the same: %v", err)
		}
		for i := range a {
			x, y := a[i], c[i]
			if x.Kind != y.Kind || x.Source != y.Source || x.Str != y.Str || x.Int != y.Int || x.Bool != y.Bool ||
				math.Float64bits(x.Double) != math.Float64bits(y.Double) {
				t.Fatalf("value %d decodes as %+v, re-encoded as %+v", i, x, y)
			}
		}
	})
}
