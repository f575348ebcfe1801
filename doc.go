// Package windowaggregator is an OpenTelemetry Collector component, in a processor and a connector
// form, that turns spans, logs and metric points into event-time window metrics. The engine is in
// internal/engine/stream (its model is stated in internal/engine/stream/doc.go); sketches are in
// internal/engine/sketch; delivery of the results in internal/delivery.
//
// The path of a record, and the file that holds each step (each file refers only to those below it):
//
//	ptrace / plog / pmetric ─► factory.go ─► the instances of both forms, written once over the
//	   │  signal's pdata (instance.go), under the names of a signal's file (spans.go, logs.go,
//	   │  metrics.go), which holds the signal's reader and its walk: the reader fills the record view
//	   │  (record.go) record by record; a metric point's reader is metricreader.go
//	   ▼
//	ingest.go, the core: a record's identity is claimed at the first aggregation that selects it
//	   │  (dedup.go's stage, over internal/dedup: a duplicate goes no further); each aggregation
//	   │  (aggregation.go) reads the view (reading.go: selection, key and value, as configured or by
//	   │  OTTL) and weighs it (weight.go); a metric point adds what its kind says against its input
//	   │  stream's last point (internal/metricinput: points.go, histograms.go, inputs.go), the stream
//	   │  keyed by streamidentity.go);
//	   │  the record is staged at its event time, a histogram point as a distribution; report.go
//	   │  counts the call's outcomes
//	   ▼
//	stream.Batch (internal/engine/stream/batch.go): Begin → SetSource → Stage → Apply → End
//	   │  shard.go → table.go, series.go → pane.go; watermark.go, source.go; window.go
//	   │  (the engine, engine.go, holds the shards; a shard fires its windows in emit.go)
//	   ├─ late / future / invalid ─► late.go: a copy of the late records, marked, for the signal's
//	   │  late pipeline (instance.go), or counted
//	   ▼  W passes a window's end
//	stream.Result with its Point (internal/engine/stream/result.go, point.go)
//	   ▼
//	internal/delivery: builder.go (the table of outputs, outputs.go) → pmetric, in batches of at
//	most emit.max_points_per_send; emitter.go: a queue bounded in points, collected and delivered by
//	the component's goroutines (split.go cuts oversized requests) ─► the sinks (sinks.go), the
//	metrics consumers
//
// state.go holds one state per component id: the engine, the metric inputs, the emitter, and with
// storage the checkpoint coordinator (internal/checkpoint: its format; it owns the ingest gate and
// captures, saves and restores the engine, the metric inputs, the identities and the emitter's
// queue); config.go, enums.go and validate.go the configuration (signal.go what each signal reads,
// ottl.go the OTTL parsers and their errors); telemetry.go the counters' attribute sets, health.go the
// component's status; memory.go the memory formula. The operator view's read side: the component is an
// internal/view Source (view.go: its state as the window_aggregator_view extension shows it;
// explain.go: one series explained, with the windows it emitted that internal/view's Watch keeps;
// aggcounts.go: records by outcome per aggregation), registered there when it starts.
//
// Each file refers only to files named after it in this order (`go run ./scripts/structure -all .`
// prints it; `make test` fails on a reference that runs back up): explain.go, factory.go, logs.go,
// metrics.go, spans.go, validate.go, view.go, ingest.go, instance.go, metricreader.go, report.go,
// state.go, aggcounts.go, dedup.go, memory.go, telemetry.go, reading.go, aggregation.go, config.go, enums.go, signal.go, ottl.go, record.go,
// streamidentity.go, health.go, late.go, weight.go.
//
// Locks, in the order they are taken (a goroutine holding one takes only those after it):
//
//	registryMu → shared.mu → delivery.Emitter.collectMu → checkpoint.Checkpointer's mu → its gate (the
//	ingest gate) → metricinput.Inputs.Mu → the remembered identities' set lock, then a slice's lock
//	(internal/dedup) → delivery.Emitter.sendMu → delivery.Emitter.healthMu → delivery.Emitter.mu →
//	delivery's sink table → the engine's locks → health.mu
//
// and, taken alone, the OTTL error log's and the OTTL parsers' locks and internal/view's registry
// lock; view.Watch's lock (the series the view's explainer keeps) is taken last, under the emitter's and
// the engine's, and takes none. health.mu is held while the component's status is reported to the
// collector, which calls nothing of the component. A collection (shared.collect) takes the emitter's
// locks and lets them go before it takes a checkpoint. A checkpoint takes its locks in one function,
// checkpoint.Checkpointer.capture, whose steps are the order above.
package windowaggregator
