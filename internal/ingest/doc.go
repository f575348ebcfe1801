// Package ingest is the path of a record from the collector's pdata into the engine's batch: each
// signal's reader fills one record view, each aggregation selects, keys, values and weighs it, dedup
// claims its identity once, a metric point adds what its kind says against its input stream, and the
// record is staged at its event time; once the batch is applied, every record's outcome is settled,
// late records are copied for the late pipeline, and the call reports its tally.
//
// The component hands it a Core (the engine, the compiled aggregations, the ingest gate, the metric
// inputs, the identities, the counters a call reports to, and a poke for what fires); the
// component's instances call its Traces, Logs or Metrics with a batch.
//
// Files, each referring only to those after it (`go run ./scripts/structure -all internal/ingest`):
//
//	logs.go, metrics.go, spans.go   a signal's reader (record by record into the view) and its walk
//	ingest.go                       the core: one call's run, stage, apply, finish; outcomes
//	metricreader.go                 the view of a metric point, and what it adds (internal/metricinput)
//	reading.go                      an aggregation's selection, key, value and weight of the view
//	distinct.go                     a record's identifiers for the distinct:<key> outputs
//	report.go, telemetry.go         what a call reports: the counters, the OTTL error log
//	aggregation.go                  the compiled aggregation, and what a signal's aggregations read
//	signal.go                       the signals: their special keys, OTTL contexts, outputs
//	ottl.go                         OTTL parsers and the errors of a call
//	dedup.go                        one call's dedup stage over internal/dedup
//	record.go                       the record view
//	aggcounts.go                    records by outcome per aggregation, for the operator's view
//	weight.go, streamidentity.go    a record's weight; a metric point's input stream identity
//	sourcekey.go                    the source key of a resource, for per-source watermarks
//	late.go                         late records marked for the late pipeline; the late actions
package ingest
