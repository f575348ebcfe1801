// Package delivery takes the engine's results out of it and into the metrics outputs: it builds
// their pdata (one metric per output of the table in outputs.go), queues them within a bound of data
// points, cuts large sends, and delivers them to the sinks (the consumers behind the component's
// metrics outputs) from goroutines of its own, retrying after a backoff, so that a slow or stalled
// consumer holds up neither the collection nor the ingest path.
//
// It knows an aggregation by its description (Aggregation), the engine by what it fires (Results),
// and the component's checkpoint by whether it is durable (Durability), which it never calls into
// otherwise: Collect reports a firing, and the component checkpoints; a checkpoint reads and restores
// the queue through Emitter.Checkpoint, Checkpointed and Restore alone. Its locks are Emitter.sendMu,
// Emitter.mu and the sinks' table's, in the component's lock order (the module's doc.go).
package delivery
