// Package sketch implements a base-2 exponential histogram following the
// OpenTelemetry data model, used as the mergeable per-(series, time pane)
// quantile sketch of the stream engine.
//
// # Buckets and scale
//
// At scale s the bucket base is 2^(2^-s). Positive bucket index i holds the
// values in (base^i, base^(i+1)]; negative values go to a separate bucket set
// by absolute value; exact zeros (of either sign) go to the zero count. The
// index of v > 0 is ceil(log2(v)*2^s) - 1, so 2^k maps to (k<<s)-1.
//
// The index is computed without logarithms: math.Float64bits gives the
// binary exponent e and the 52-bit mantissa m (subnormals are normalized).
// For s <= 0 the index is (e - [m==0]) >> -s. For 1 <= s <= 10 a shared table
// splits the octave [1,2) into 2^(s+1) equal cells, each narrower than the
// narrowest bucket, so a cell contains at most one bucket boundary; the index
// is (e<<s) + base[cell] + (m > thr[cell]) - [m==0]. The thresholds are
// floor(2^52*(2^(j/2^s)-1)), computed once with 256-bit math/big arithmetic;
// because the true boundaries are irrational, this mapping is exactly the
// mathematical definition for every float64, powers of two included. Scales
// 11..20 use math.Log (exact at powers of two, within floating point
// elsewhere). A histogram computes indices at its initial scale and shifts
// them right by the number of downscaling steps, which is exact because
// index(s-k) = index(s) >> k.
//
// # Scale choice and error bound
//
// DefaultScale is 6 (base 2^(1/64) ≈ 1.0109). Quantile returns, for the
// bucket (L,U] holding the requested rank, 2LU/(L+U), whose relative error to
// any value in the bucket is at most (base-1)/(base+1) ≈ 0.54%, and clamps it
// into [Min, Max]. While no downscaling happened this bounds the error
// against the exact nearest-rank quantile x_(ceil(q*n)-1). One latency-like pane
// (1 µs..1 h, ~31.8 octaves) needs at most ~2040 buckets at scale 6, within
// DefaultMaxBuckets = 4096.
//
// # Counter widening
//
// Each sign keeps a dense window of counters covering bucket indices
// [lo, lo+n), growing by ~1.5x at whichever end needs it and centred on the
// occupied range. Counters start 1 byte wide; when one would overflow, the
// whole window is widened in place (when capacity allows) to 2, 4 and then 8
// bytes. A pane of a few hundred latency values therefore costs a few hundred
// bytes. Reset clears the counters back to 1-byte width and the initial
// scale but keeps the allocation, so pooled histograms refill without
// allocating. Insert is allocation-free whenever the index lands inside the
// window; the window never exceeds maxBuckets slots, so such inserts can
// never break the span limit.
//
// # Counts
//
// InsertN records one value n times in one step: a count of n in its
// bucket, not n inserts. The stream engine uses it for weighted records (a
// sampled span that stands for n spans), so that every bucket, the count and
// the quantiles take the weight at the cost of one insert.
//
// # Downscaling
//
// When an insert or a merge would make the occupied index span of either
// sign exceed maxBuckets, the scale is lowered by the smallest k that makes
// both signs fit (one scale per histogram, as in OpenTelemetry) and bucket
// pairs are merged in place (new index = old index >> k), widening counters
// first if a merged count would overflow. Merge brings both operands to the
// coarser scale (the argument is never modified; its indices are shifted on
// the fly) and is exact: the result equals, bucket for bucket, the histogram
// of the union of the inserted values at that scale. Scales never go below
// minScale (-10), where any set of finite values fits in 3 buckets.
//
// # Encoding
//
// AppendBinary writes a compact, versioned encoding: a version byte
// (encodingVersion = 1), scales and counts as varints, sum/min/max as raw
// float64 bits, then each sign's offset, length and trimmed counts as
// uvarints. UnmarshalBinary returns the number of bytes consumed so
// encodings can be embedded in larger streams, validates every field (range
// of scales, indices, lengths against both maxBuckets and the remaining
// input, trimmed runs, counts adding up to the total) and returns an error
// rather than panicking on truncated or corrupt input.
package sketch
