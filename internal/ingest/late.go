package ingest

import (
	"iter"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
)

// Attributes added to the late records that the connector routes.
const (
	AttrLateReason = "window_aggregator.late.reason"    // expired | future | invalid
	AttrWatermark  = "window_aggregator.late.watermark" // the watermark the record was judged by, Unix ns
)

// markLate marks a routed late record with its reason and the watermark it was judged by.
func markLate(m pcommon.Map, reason string, watermark int64) {
	m.PutStr(AttrLateReason, reason)
	if watermark != stream.NoWatermark {
		m.PutInt(AttrWatermark, watermark)
	}
}

// levels are what the late copy needs of a signal's pdata: a batch B of resources R, each of scopes
// S, each of records E; and appending a copy of each under a new parent (a resource or a scope with
// its schema URL and none of its children; a record whole, returning its attributes).
type levels[B, R, S, E any] struct {
	newBatch    func() B
	resources   func(B) iter.Seq2[int, R]
	scopes      func(R) iter.Seq2[int, S]
	records     func(S) iter.Seq2[int, E]
	addResource func(B, R) R
	addScope    func(R, S) S
	addRecord   func(S, E) pcommon.Map
}

// lateCopy copies the records of b that reasonOf names late into a new batch, under copies of their
// resource and scope, each marked with its reason and watermark. reasonOf takes a record's index in
// b's order and returns "" for a record that is not late.
func lateCopy[B, R, S, E any](lv *levels[B, R, S, E], b B, reasonOf func(i int) (string, int64)) B {
	out := lv.newBatch()
	n := 0
	for _, r := range lv.resources(b) {
		var outR R
		madeR := false
		for _, sc := range lv.scopes(r) {
			var outS S
			madeS := false
			for _, e := range lv.records(sc) {
				reason, w := reasonOf(n)
				n++
				if reason == "" {
					continue
				}
				if !madeR {
					outR, madeR = lv.addResource(out, r), true
				}
				if !madeS {
					outS, madeS = lv.addScope(outR, sc), true
				}
				markLate(lv.addRecord(outS, e), reason, w)
			}
		}
	}
	return out
}

// numVerdicts sizes the tables indexed by verdict; Invalid is the last.
const numVerdicts = int(stream.Invalid) + 1

// LateAction is what happened to a call's late records: the late counter's action attribute.
type LateAction uint8

const (
	LateDropped LateAction = iota
	LateRouted
	LatePassed // the processor hands every record on
	NumLateActions
)

var LateActionNames = [NumLateActions]string{LateDropped: "dropped", LateRouted: "routed", LatePassed: "passed"}
