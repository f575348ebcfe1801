// Package stream is the event-time window engine under both collector forms of window_aggregator. It
// has no collector imports: records come in as (aggregation, series key, event time, value) and window
// results come out as plain structs.
//
// # Model
//
// Windows are aligned to the Unix epoch: [start, start+size) with start a multiple of slide. The engine
// keeps, per series, one pane per slide ([p, p+slide)); a record updates exactly one pane, and a window's
// result is the merge of the size/slide panes it covers when it fires.
//
// The watermark W is the greatest accepted event time minus max_out_of_orderness, raised further by the
// idle rule (after idle_timeout of wall-clock silence W advances with the wall clock). W moves between
// batches: every record of one batch is judged against the W that held when the batch began (or a
// newer one, if the idle rule or a concurrent batch moved the shard forward meanwhile), and the
// batch's accepted records raise W when it ends. This makes a batch's outcome independent of the order
// of records inside it.
//
// For a record at t and each window w containing t: W < w.end: added; w.end <= W < w.end+lateness: added
// and w fires again (a late firing); otherwise w has expired for it. A record whose windows have all
// expired is returned as Expired and is not aggregated.
//
// # Concurrency
//
// Series are spread over shards by a hash of their key; each shard has its own lock, its own copy of
// the watermark it has applied, and its own pending results. Firing is done per shard ("flush point")
// whenever the watermark it sees crosses a window end or an expiry boundary, and by Collect. Between two
// flush points of a shard, the set of fired and of expired windows is constant, which is what lets a
// pane keep a single delta of late records for every window that fired before it.
package stream
