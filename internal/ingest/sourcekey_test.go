package ingest

import (
	"maps"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// A source key reads back as the values it was written from, a missing key as empty, and a damaged
// key as what was read before the damage.
func TestSourceKeyReadsBackItsValues(t *testing.T) {
	res := pcommon.NewMap()
	res.PutStr("k8s.pod.name", "api-7")
	res.PutInt("shard", 12)
	keys := []string{"k8s.pod.name", "shard", "host.name"}
	b := appendSourceKey(nil, res, keys)
	want := map[string]string{"k8s.pod.name": "api-7", "shard": "12", "host.name": ""}
	if got := DecodeSourceKey(keys, b); !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// "api-7" is 1+5 bytes, "12" 1+2: cut inside the second value
	if got := DecodeSourceKey(keys, b[:8]); !maps.Equal(got, map[string]string{"k8s.pod.name": "api-7"}) {
		t.Fatalf("damaged: got %v", got)
	}
	if b2 := appendSourceKey(nil, res, []string{"shard", "k8s.pod.name"}); string(b2) == string(b) {
		t.Fatal("the keys' order is not part of the key")
	}
}
