// Package windowaggregator is an OpenTelemetry Collector component, in a processor and a connector
// form, that turns spans and logs into event-time window metrics. The engine is in processor/stream
// (its model is stated in processor/stream/doc.go); sketches are in processor/sketch.
//
// The path of a record, and the file that holds each step:
//
//	ptrace / plog ─► connector.go, processor.go ─► state.go: one state per component id
//	   │  ingest.go walks resources, scopes, records      (engine, emitter, checkpoint.go)
//	   ▼
//	recordView (aggregation.go): compileAggregation → matches, value, buildKey
//	   ▼  series key, event time, value
//	stream.Batch (processor/stream/engine.go): Begin → SetSource → Stage → Apply → End
//	   │  shard.go → table.go, series.go → pane.go; watermark.go, source.go; window.go
//	   ├─ late / future / invalid ─► late.go ─► traces/logs late pipeline, or counted
//	   ▼  W passes a window's end
//	stream.Result with its Point (processor/stream/result.go, point.go)
//	   ▼
//	metrics_builder.go (outputs.go) → pmetric, in batches of at most emit.max_points_per_send
//	   ▼
//	emitter.go: queue bounded in points; the component's goroutines collect, checkpoint (with
//	storage), and deliver (split.go for oversized requests) ─► metrics consumer
package windowaggregator
