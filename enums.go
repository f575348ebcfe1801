package windowaggregator

import (
	"fmt"
	"slices"
	"strings"

	"github.com/windowaggregator/windowaggregator/internal/ingest"
)

// The configuration's enumerations, each a type whose UnmarshalText refuses a value outside it: a bad
// value fails the configuration where it is read, and the collector names its key. Validate checks
// them again (check), for configurations built in code.

type (
	// Temporality is the temporality of count, sum and histogram: cumulative running totals per
	// series, or delta, the records of one slide per point.
	Temporality string
	// LateFirings says where a record added within allowed_lateness goes: fold, into its series' next
	// point; revise (delta only), into a re-emitted slide of its window.
	LateFirings string
	// LateAction is what becomes of late data: route, to the late pipelines; drop, counted.
	LateAction string
)

const (
	temporalityCumulative Temporality = "cumulative"
	temporalityDelta      Temporality = "delta"
	lateFold              LateFirings = "fold"
	lateRevise            LateFirings = "revise"
	actionRoute           LateAction  = "route"
	actionDrop            LateAction  = "drop"
)

func (t Temporality) check() error { return oneOf(t, temporalityCumulative, temporalityDelta) }
func (f LateFirings) check() error { return oneOf(f, lateFold, lateRevise) }
func (a LateAction) check() error  { return oneOf(a, actionRoute, actionDrop) }

func (t *Temporality) UnmarshalText(text []byte) error { return unmarshalEnum(t, text) }
func (f *LateFirings) UnmarshalText(text []byte) error { return unmarshalEnum(f, text) }
func (a *LateAction) UnmarshalText(text []byte) error  { return unmarshalEnum(a, text) }

// SignalName is an aggregation's signal: spans, logs or metrics.
type SignalName string

func (s SignalName) check() error {
	if ingest.SignalNamed(string(s)) == nil {
		return fmt.Errorf("must be one of %s, got %q", strings.Join(ingest.SignalNames(), ", "), s)
	}
	return nil
}

func (s *SignalName) UnmarshalText(text []byte) error { return unmarshalEnum(s, text) }

// Unit is the unit of a duration value: ns, us, ms or s; "" is ms. unitScale is the nanoseconds of
// each.
type Unit string

var unitScale = map[Unit]float64{"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}

func (u Unit) check() error {
	if _, ok := unitScale[u]; !ok && u != "" {
		return fmt.Errorf("must be one of ns, us, ms, s, got %q", u)
	}
	return nil
}

func (u *Unit) UnmarshalText(text []byte) error { return unmarshalEnum(u, text) }

// Weight is what a record stands for: adjusted_count (the sampling's adjusted count, from a span's
// tracestate), none (1), or attribute:<key>; "" is its signal's default.
type Weight string

const (
	weightAdjustedCountName Weight = "adjusted_count"
	weightNoneName          Weight = "none"
	// valueAttributePrefix begins a weight, or a value, read from an attribute.
	valueAttributePrefix = "attribute:"
)

// isAttribute reports whether s is of the form attribute:<key>.
func isAttribute(s string) bool { _, ok := attributeKey(s); return ok }

// attributeKey returns the key of an attribute:<key> weight or value source; ok is false for
// another form.
func attributeKey(s string) (key string, ok bool) { return strings.CutPrefix(s, valueAttributePrefix) }

func (w Weight) check() error {
	key, attr := attributeKey(string(w))
	switch {
	case w == "" || w == weightNoneName || w == weightAdjustedCountName:
	case attr:
		if key == "" {
			return fmt.Errorf("attribute: needs a key, as in attribute:sample.rate")
		}
	default:
		return fmt.Errorf("must be adjusted_count, none or attribute:<key>, got %q", w)
	}
	return nil
}

func (w *Weight) UnmarshalText(text []byte) error { return unmarshalEnum(w, text) }

// LogPart is a part of a log record that dedup.logs.key may list.
type LogPart string

// logParts are the values of LogPart, in the order they are hashed.
var logParts = [ingest.NumLogParts]LogPart{"time", "observed_time", "severity", "body", "attributes", "resource", "scope", "trace_id", "span_id"}

func (p LogPart) check() error { return oneOf(p, logParts[:]...) }

func (p *LogPart) UnmarshalText(text []byte) error { return unmarshalEnum(p, text) }

// enum is a configuration enumeration: a string type that checks its value.
type enum interface {
	~string
	check() error
}

// unmarshalEnum sets *e to text if it is one of e's values.
func unmarshalEnum[E enum](e *E, text []byte) error {
	v := E(text)
	if err := v.check(); err != nil {
		return err
	}
	*e = v
	return nil
}

// oneOf checks that v is one of values.
func oneOf[E ~string](v E, values ...E) error {
	if slices.Contains(values, v) {
		return nil
	}
	quoted := make([]string, len(values))
	for i, x := range values {
		quoted[i] = fmt.Sprintf("%q", x)
	}
	return fmt.Errorf("must be %s or %s, got %q", strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1], v)
}
