// Package windowaggregator is an OpenTelemetry Collector component, in a processor and a connector
// form, that turns spans, logs and metric points into event-time window metrics. The engine is in
// processor/stream (its model is stated in processor/stream/doc.go); sketches are in
// processor/sketch.
//
// The path of a record, and the file that holds each step:
//
//	ptrace / plog / pmetric ─► spans.go, logs.go, metrics.go: a signal's instances (both forms),
//	   │  the walk of its pdata, the record view filled record by record (record.go), its late
//	   │  records' routing (metric points: what a point adds to an aggregation, datapoints.go, from
//	   │  its input stream's last point, inputstreams.go)
//	   ▼  state.go: one state per component id (engine, emitter, checkpoint.go)
//	ingest.go, the core: each aggregation (aggregation.go) reads the view (reading.go): selects,
//	   │  keys, values and weighs (weight.go) the record, which is staged at its event time (a
//	   │  histogram point as a distribution)
//	   ▼
//	stream.Batch (processor/stream/engine.go): Begin → SetSource → Stage → Apply → End
//	   │  shard.go → table.go, series.go → pane.go; watermark.go, source.go; window.go
//	   ├─ late / future / invalid ─► the signal's file ─► its late pipeline (late.go marks), or counted
//	   ▼  W passes a window's end
//	stream.Result with its Point (processor/stream/result.go, point.go)
//	   ▼
//	metrics_builder.go (outputs.go) → pmetric, in batches of at most emit.max_points_per_send
//	   ▼
//	emitter.go: queue bounded in points; the component's goroutines collect, checkpoint (with
//	storage), and deliver (split.go for oversized requests) ─► metrics consumer
package windowaggregator
