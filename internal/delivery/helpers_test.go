package delivery

import "testing"

// testAggregation is an aggregation of spans named name, of no group_by keys, with outputs.
func testAggregation(t testing.TB, name string, outputs ...string) *Aggregation {
	t.Helper()
	c, err := Compile(outputs, false)
	if err != nil {
		t.Fatal(err)
	}
	return &Aggregation{Name: name, Record: "span", Outputs: c.Outputs, HistMax: 160,
		Unit: func() string { return "ms" }, MonotonicSum: func() bool { return true }}
}
