package stream

// Accumulator is the state of one output kept beside a pane's totals and sketch: an output that
// those do not hold (the values' spread, the number of distinct values) is one Accumulator and its
// kind. An aggregation lists its kinds (Aggregation.Accumulators); every pane of its series holds one
// accumulator of each, which takes every record the pane takes, on time or late; a window's figure is
// its panes' merged (Merge, in emit.go's windowValues) and read as one number (Value), in
// Result.Values. Such an output is a gauge of the whole window: unlike the additive outputs it has no
// late delta, fold or running total, and a late firing carries it corrected, as it does avg.
//
// The scalar outputs (totals.go), the sketch (sketches.go), the explicit buckets (buckets.go) and the
// exemplars (exemplars.go) keep their own layout in the pane, which the hot path of every record
// reads: an interface call per record and output would cost them what the engine exists to save.
type Accumulator interface {
	// Add adds n records of value v (hasValue: v is finite) whose identifier, for the kind's
	// AccumulatorKind.ID, is id (0: the record has none).
	Add(v float64, hasValue bool, n uint64, id uint64)
	// AddDist adds a distribution record (see Distribution) with identifier id.
	AddDist(d *Distribution, id uint64)
	// Merge adds what o, an accumulator of the same kind, holds.
	Merge(o Accumulator)
	// Reset empties it, keeping its storage.
	Reset()
	// Value is the output's figure for the records it holds.
	Value() float64
	// AppendBinary appends its encoding, for a snapshot; Decode reads one into it and returns the
	// bytes after it.
	AppendBinary(b []byte) []byte
	Decode(b []byte) ([]byte, error)
}

// AccumulatorKind is one of an aggregation's accumulators.
type AccumulatorKind struct {
	// Name identifies the kind in a snapshot's configuration: a snapshot restores only into an
	// engine whose aggregations have the same kinds in the same order.
	Name string
	New  func() Accumulator
	// ID is the index, in Record.IDs, of the identifier the kind takes; -1: none.
	ID int
	// Bytes bounds what one accumulator holds, for the memory estimate.
	Bytes int
}

// idOf returns the identifier that kind k takes from a record's ids.
func (k *AccumulatorKind) idOf(ids []uint64) uint64 {
	if k.ID < 0 || k.ID >= len(ids) {
		return 0
	}
	return ids[k.ID]
}

// accumulators are one pane's accumulators, one of each of its aggregation's kinds.
type accumulators []Accumulator

// add adds item it, a record of the pane, to each accumulator, of kinds.
func (accs *accumulators) add(kinds []AccumulatorKind, it *item) {
	for i, acc := range *accs {
		id := kinds[i].idOf(it.ids)
		if it.dist != nil {
			acc.AddDist(it.dist, id)
		} else {
			acc.Add(it.v, it.hasValue, it.n, id)
		}
	}
}

// newAccumulators returns one empty accumulator of each of kinds; nil for none.
func newAccumulators(kinds []AccumulatorKind) *accumulators {
	if len(kinds) == 0 {
		return nil
	}
	accs := make(accumulators, len(kinds))
	for i := range kinds {
		accs[i] = kinds[i].New()
	}
	return &accs
}

// accumulatorsFree are the accumulators of dropped panes, by aggregation, to be used again.
type accumulatorsFree [][]*accumulators

// get returns empty accumulators of aggregation agg, of kinds.
func (f *accumulatorsFree) get(agg int32, kinds []AccumulatorKind) *accumulators {
	if len(kinds) == 0 {
		return nil
	}
	if int(agg) < len(*f) {
		if free := (*f)[agg]; len(free) > 0 {
			accs := free[len(free)-1]
			free[len(free)-1] = nil
			(*f)[agg] = free[:len(free)-1]
			for _, acc := range *accs {
				acc.Reset()
			}
			return accs
		}
	}
	return newAccumulators(kinds)
}

func (f *accumulatorsFree) put(agg int32, accs *accumulators) {
	if accs == nil {
		return
	}
	for int(agg) >= len(*f) {
		*f = append(*f, nil)
	}
	(*f)[agg] = append((*f)[agg], accs)
}

// encodeAccumulators writes a pane's accumulators.
func encodeAccumulators(enc *encoder, accs *accumulators) {
	if accs == nil {
		enc.uvarint(0)
		return
	}
	enc.uvarint(uint64(len(*accs)))
	for _, acc := range *accs {
		enc.b = acc.AppendBinary(enc.b)
	}
}

// decodeAccumulators reads a pane's accumulators, of kinds: one of each, or none from a snapshot
// of a version before them.
func decodeAccumulators(d *decoder, kinds []AccumulatorKind) *accumulators {
	if d.old {
		return newAccumulators(kinds)
	}
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	if n != len(kinds) {
		d.fail()
		return nil
	}
	accs := newAccumulators(kinds)
	if accs == nil {
		return nil
	}
	for _, acc := range *accs {
		rest, err := acc.Decode(d.b)
		if err != nil {
			d.fail()
			return nil
		}
		d.b = rest
	}
	return accs
}
