package stream

// Verdict is what became of one record in one aggregation.
type Verdict uint8

const (
	// OnTime: added; none of its windows had fired.
	OnTime Verdict = iota
	// LateUpdate: added; at least one of its windows had fired and will fire again (a late firing).
	LateUpdate
	// Expired: every window containing the record had expired; not aggregated. It is late data.
	Expired
	// Future: stamped later than now + max_future_skew; not aggregated, does not move the watermark.
	Future
	// Invalid: no usable event time (zero or negative); not aggregated.
	Invalid
	numVerdicts
)

var verdictNames = [numVerdicts]string{"on_time", "late_update", "expired", "future", "invalid"}

// String returns the verdict's snake_case name, as used in counters and attributes.
func (v Verdict) String() string { return nameOf(verdictNames[:], v) }

// nameOf returns names[v], or "unknown" past the last.
func nameOf[E ~int | ~uint8](names []string, v E) string {
	if int(v) >= 0 && int(v) < len(names) {
		return names[v]
	}
	return "unknown"
}

// Aggregated reports whether the record was added to the windows.
func (v Verdict) Aggregated() bool { return v == OnTime || v == LateUpdate }
