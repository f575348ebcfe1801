// Package windowaggregator is an OpenTelemetry Collector component, in a processor and a connector
// form, that turns spans, logs and metric points into event-time window metrics. The engine is in
// internal/engine/stream (its model is stated in internal/engine/stream/doc.go); sketches are in
// internal/engine/sketch; delivery of the results in internal/delivery.
//
// The root is the shell: the configuration (config.go, enums.go, validate.go), the factories
// (factory.go) and the instances of both forms with their lifecycle (instance.go, written once over a
// signal's pdata; forms.go names them for ptrace, plog and pmetric), and the state one component id
// shares (state.go). The parts that own their state are packages:
//
//	ptrace / plog / pmetric ─► factory.go ─► instance.go, forms.go
//	   ▼
//	internal/ingest: a signal's reader fills the record view; each aggregation (compiled by
//	   │  compile.go) selects, keys, values and weighs it; dedup claims its identity (internal/dedup);
//	   │  a metric point adds what its kind says against its input stream (internal/metricinput);
//	   │  the record is staged at its event time; late records are copied for the late pipeline
//	   ▼
//	stream.Batch (internal/engine/stream: the engine, its shards, series, panes and watermark)
//	   ▼  W passes a window's end
//	internal/delivery: the table of outputs, the results as pmetric, the queue and the sinks
//
// state.go holds one state per component id: ingest's Core (the engine, the aggregations, the metric
// inputs, the identities, the counters an ingest call reports to), the emitter, with storage the
// checkpoint coordinator (internal/checkpoint: its format; it owns the ingest gate and captures,
// saves and restores the engine, the metric inputs, the identities and the emitter's queue), and the
// callback that observes the state's gauges. health.go holds the component's status, memory.go the
// memory formula. The operator view's read side: the
// component is an internal/view Source (view.go: its state as the window_aggregator_view extension
// shows it; explain.go: one series explained, with the windows it emitted that internal/view's Watch
// keeps), registered there when it starts.
//
// Each file refers only to files named after it in this order (`go run ./scripts/structure -all .`
// prints it; `make test` fails on a reference that runs back up): explain.go, factory.go, forms.go,
// instance.go, validate.go, view.go, state.go, compile.go, memory.go, config.go, health.go, enums.go.
//
// Locks, in the order they are taken (a goroutine holding one takes only those after it):
//
//	registryMu → shared.mu → delivery.Emitter.collectMu → checkpoint.Checkpointer's mu → its gate (the
//	ingest gate) → metricinput.Inputs.Mu → the remembered identities' set lock, then a slice's lock
//	(internal/dedup) → delivery.Emitter.sendMu → delivery.Emitter.healthMu → delivery.Emitter.mu →
//	delivery's sink table → the engine's locks → health.mu
//
// and, taken alone, the OTTL error log's and the OTTL parsers' locks (internal/ingest) and
// internal/view's registry lock; view.Watch's lock (the series the view's explainer keeps) is taken
// last, under the emitter's and the engine's, and takes none. health.mu is held while the component's status is reported to the
// collector, which calls nothing of the component. A collection (shared.collect) takes the emitter's
// locks and lets them go before it takes a checkpoint. A checkpoint takes its locks in one function,
// checkpoint.Checkpointer.capture, whose steps are the order above.
package windowaggregator
