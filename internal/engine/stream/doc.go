// Package stream is the event-time window engine under both collector forms of window_aggregator. It
// has no collector imports: records come in as (aggregation, series key, event time, value) and window
// results come out as plain structs.
//
// # Model
//
// Windows are aligned to the Unix epoch: [start, start+size) with start Config.Offset (0 by default)
// plus a multiple of slide. The engine keeps, per series, one pane per slide ([p, p+slide)); a record
// updates exactly one pane, and a window's result is the merge of the size/slide panes it covers when
// it fires.
//
// The watermark W starts below every timestamp and only moves forward. Accepted records move it, up to
// the wall clock, and so does the wall clock up to them; the idle rule too. It never runs ahead of the
// wall clock: W <= now - max_out_of_orderness at all
// times. A record stamped ahead of the clock (within max_future_skew) is accepted and aggregated into
// its windows, but cannot push W past the clock: W follows the clock up to it.
//
// Without per-source tracking, W is min(greatest accepted event time, now) - max_out_of_orderness. With
// it (Config.PerSource), each source that Batch.SetSource names has its own W_s, min(its greatest
// accepted event time, now) - max_out_of_orderness, and W is the least W_s over the sources that have
// had a record accepted within source_idle_timeout of wall-clock time. A source whose clock is behind
// holds W back instead of having its records expire; one that falls silent stops holding it back
// after source_idle_timeout. At most max_sources sources are held, each from the batch that first
// names it until it has been silent for source_idle_timeout; the sources past them count as one, the
// shared source.
//
// Idle rule: once idle_timeout of wall-clock time passes without an accepted record, W advances with
// the wall clock from the W of the last batch that accepted one: W_last + (now - that batch's wall
// time), never past now - max_out_of_orderness. Collect applies it. Time the collector was not running
// is not silence: after Restore the idle rule counts from the restore's wall time, from the restored
// W, and every restored source counts as heard from at that time.
//
// W moves between batches: every record of one batch is judged against the W at Begin(now) (or a
// newer one, if the idle rule or a concurrent batch moved the shard forward meanwhile), and the batch's
// accepted records raise W when it ends. This makes a batch's outcome independent of the order of
// records inside it. W also moves with the wall clock between batches, so a window can fire before the
// next batch's records are judged.
//
// For a record at t and each window w containing t: W < w.end: added; w.end <= W < w.end+lateness: added
// and w fires again (a late firing); otherwise w has expired for it. A record whose windows have all
// expired is returned as Expired and is not aggregated.
//
// # Weights
//
// A record of weight n (Record.Weight, a sampled span's adjusted count) counts as n records of its
// value in every aggregate but min, max and exemplars: n in counts and bucket counts, n×v in sums,
// one insert of count n in a sketch. The counts a pane, a fold, a series' totals and a snapshot hold
// are weighted counts; nothing else tells weighted records from others.
//
// # Concurrency
//
// Series are spread over shards by a hash of their key; each shard has its own lock, its own copy of
// the watermark it has applied, and its own pending results. Firing is done per shard ("flush point")
// whenever the watermark it sees crosses a window end or an expiry boundary, and by Collect. Between two
// flush points of a shard, the set of fired and of expired windows is constant, which is what lets a
// pane keep a single delta of late records for every window that fired before it.
package stream
