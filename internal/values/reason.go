// Package values names why a record has no value (each a values_missing counter reason), for the
// reading of spans' and logs' values and of metric points alike.
package values

import "math"

// Reason is why a record has no value; OK: it has one.
type Reason uint8

const (
	OK Reason = iota
	Missing
	NotNumeric
	NotFinite
	EndBeforeStart
	NoStart
	Negative // a monotonic sum's negative value: no increase
	NumReasons
)

// Names are the reasons' counter attribute values.
var Names = [NumReasons]string{
	Missing: "missing", NotNumeric: "not_numeric", NotFinite: "not_finite", EndBeforeStart: "end_before_start",
	NoStart: "no_start", Negative: "negative",
}

// Finite returns f, or NaN and NotFinite for a NaN or infinite f.
func Finite(f float64) (float64, Reason) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return math.NaN(), NotFinite
	}
	return f, OK
}
