package windowaggregator

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/checkpoint"
	"github.com/windowaggregator/windowaggregator/internal/dedup"
	"github.com/windowaggregator/windowaggregator/internal/delivery"
	"github.com/windowaggregator/windowaggregator/internal/engine/clock"
	"github.com/windowaggregator/windowaggregator/internal/engine/stream"
	"github.com/windowaggregator/windowaggregator/internal/ingest"
	"github.com/windowaggregator/windowaggregator/internal/metadata"
	"github.com/windowaggregator/windowaggregator/internal/metricinput"
	"github.com/windowaggregator/windowaggregator/internal/view"
)

// shared is the state of one component id, common to every instance of it in both forms: one engine,
// one watermark, one emitter. It is created with the first instance, started with the first Start,
// and torn down when the last instance shuts down.
type shared struct {
	// Core is what the ingest path reads (internal/ingest)
	ingest.Core
	id     component.ID
	cfg    *Config
	logger *zap.Logger

	emitter *delivery.Emitter
	// described are the aggregations as delivery builds their metrics (names, units)
	described []*delivery.Aggregation
	storage   *checkpoint.Checkpointer
	// dedup holds the identities of the records aggregated (nil: dedup.enabled is false)
	dedup *dedup.Set
	// health is what the component reports through the collector's component status
	health health
	// watch keeps the last values of the series an operator asks the view about
	watch view.Watch

	mu        sync.Mutex
	instances int // created and not yet shut down
	started   bool
	// The feeds of each input signal that are still running (see addFeed), and the aggregations
	// whose windows were fired as they stood at shutdown.
	connectorFeeds [ingest.NumInputs]int
	connectorDone  [ingest.NumInputs]bool
	processorFeeds [ingest.NumInputs]int
	drained        []bool
	// routes: a connector's ->traces (->logs) instance exists for the signal: it aggregates the
	// signal's batches (so that the ->metrics instance, handed the same batches, does not) and routes
	// their late records.
	routes [ingest.NumInputs]bool
	stop   chan struct{}
	done   chan struct{}
}

var (
	registryMu sync.Mutex
	registry   = map[component.ID]*shared{}
)

// acquire returns the shared state of id, creating it with the first instance. The engine's wall
// clock is the one ctx carries (clock.NewContext), else the system clock.
func acquire(ctx context.Context, set component.TelemetrySettings, id component.ID, cfg *Config) (*shared, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s, ok := registry[id]; ok {
		if !s.cfg.sameSettings(cfg) {
			return nil, fmt.Errorf("%s: every instance of one component id shares one state, but this one is configured differently from another (a processor and a connector with the same id must have the same settings; give them different names)", id)
		}
		s.mu.Lock()
		s.instances++
		s.mu.Unlock()
		return s, nil
	}
	s, err := newShared(set, id, cfg, clock.FromContext(ctx))
	if err != nil {
		return nil, err
	}
	s.instances = 1
	registry[id] = s
	return s, nil
}

// instanceID is the collector's service.instance.id, from the resource of its own telemetry (which the
// collector fills in, with a new UUID at each start unless service::telemetry::resource sets one);
// "" if there is none.
func instanceID(res pcommon.Resource) string {
	v, ok := res.Attributes().Get(delivery.InstanceKey)
	if !ok {
		return ""
	}
	return v.AsString()
}

func newShared(set component.TelemetrySettings, id component.ID, cfg *Config, clk clock.Clock) (*shared, error) {
	s := &shared{id: id, cfg: cfg, logger: set.Logger, drained: make([]bool, len(cfg.Aggregations))}
	ecfg := stream.Config{
		Size: cfg.Window.Size, Slide: cfg.Window.Slide, Offset: cfg.Window.Offset, EarlyResults: cfg.Window.EarlyResults,
		MaxOutOfOrderness: cfg.Watermark.MaxOutOfOrderness, IdleTimeout: cfg.Watermark.IdleTimeout,
		MaxFutureSkew: cfg.Watermark.MaxFutureSkew, AllowedLateness: cfg.AllowedLateness,
		PerSource: len(cfg.Watermark.PerSource) > 0, SourceIdleTimeout: cfg.Watermark.SourceIdleTimeout,
		MaxSources: cfg.Watermark.MaxSources,
		Cumulative: cfg.Temporality == temporalityCumulative, FoldLate: cfg.LateFirings == lateFold,
		SeriesExpiration: cfg.SeriesExpiration,
		Clock:            clk,
	}
	for i, ac := range cfg.Aggregations {
		a, err := compileAggregation(i, ac, cfg.parsers(set))
		if err != nil {
			return nil, err
		}
		s.Aggs = append(s.Aggs, a)
		s.BySignal[a.Signal.Input].Add(a)
		ecfg.Aggregations = append(ecfg.Aggregations, a.EngineAggregation(cfg.MaxSeries))
	}
	var err error
	if s.Engine, err = stream.New(ecfg); err != nil {
		return nil, err
	}
	s.dedup, s.DedupOf = newDedup(cfg)
	if cfg.Dedup.Logs != nil {
		s.LogKey = logKeyOf(cfg.Dedup.Logs.Key)
	}
	names := make([]string, len(s.Aggs))
	for i, a := range s.Aggs {
		names[i] = a.Name
	}
	if s.Reporter.Telemetry, err = ingest.NewTelemetry(set, names); err != nil {
		return nil, err
	}
	points := make([]bool, len(s.Aggs))
	for i, a := range s.Aggs {
		points[i] = a.Signal.Points
	}
	s.Inputs = metricinput.New(points, cfg.MaxInputStreams)
	for i, a := range s.Aggs {
		a.Input = s.Inputs.ByAgg[i]
	}
	t := pmetric.AggregationTemporalityDelta
	if cfg.Temporality == temporalityCumulative {
		t = pmetric.AggregationTemporalityCumulative
	}
	described := make([]*delivery.Aggregation, len(s.Aggs))
	s.described = described
	for i, a := range s.Aggs {
		described[i] = a.Delivered()
	}
	s.emitter = delivery.New(delivery.Config{Interval: cfg.Emit.Interval, MaxPendingPoints: cfg.Emit.MaxPendingPoints,
		MaxPointsPerSend: cfg.Emit.MaxPointsPerSend, Temporality: t, Version: moduleVersion(), Inputs: ingest.NumInputs},
		described, s.Engine, s.Reporter.Telemetry.TelemetryBuilder, s.logger)
	// The collector's, until a restored checkpoint says another (see checkpoint.Checkpointer.Restore).
	s.emitter.SetInstance(instanceID(set.Resource))
	s.emitter.SetHealth(func(err error) { s.health.set(deliveryConcern, err) })
	s.watch.Gauges = func(r *stream.Result, put func(string, float64)) { described[r.Agg].Gauges(r, put) }
	s.emitter.SetObserver(s.watch.Observe)
	s.ByAgg = make([]ingest.AggregationCounts, len(s.Aggs))
	if err := s.observe(); err != nil {
		return nil, err
	}
	if cfg.Storage != nil {
		gated := make([]bool, ingest.NumInputs)
		for input := range gated {
			gated[input] = input == ingest.InputMetrics || s.DedupOf[input] != nil
		}
		s.storage = checkpoint.New(checkpoint.Options{ID: id, Storage: *cfg.Storage, Fingerprint: stateFingerprint(cfg),
			Gated: gated, MaxInput: ingest.InputAny, Logger: s.logger,
			Counted: func(ctx context.Context, reason string) {
				s.Reporter.Telemetry.WindowAggregatorCheckpoints.Add(ctx, 1, ingest.ReasonAttr(reason))
			},
			SetHealth: func(err error) { s.health.set(checkpointConcern, err) },
			Engine:    s.Engine, Inputs: s.Inputs, Dedup: s.dedup, Emitter: s.emitter})
		s.emitter.SetDurability(s.storage)
	}
	// Without storage the gate is a nil *checkpoint.Checkpointer, whose Enter takes nothing.
	s.Core.Gate, s.Core.Poke = s.storage, s.emitter.Poke
	s.Reporter.Logger = s.logger
	s.Core.PerSource, s.Core.ErrorMode = cfg.Watermark.PerSource, cfg.ErrorMode
	s.Core.SeriesExpiration, s.Core.DropAggregatedInput = int64(cfg.SeriesExpiration), cfg.DropAggregatedInput
	return s, nil
}

// observe registers the callback that reads the observable instruments from the state: one
// callback for all of them, so that the engine's Stats are read once per collection (the builder's
// Register...Callback would register one callback, and read Stats once, per instrument).
func (s *shared) observe() error {
	t := s.Reporter.Telemetry
	reg, err := t.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Engine.Stats()
		o.ObserveInt64(t.WindowAggregatorWindowsFired, int64(st.WindowsFired))
		o.ObserveInt64(t.WindowAggregatorLateFirings, int64(st.LateFirings))
		o.ObserveInt64(t.WindowAggregatorOverflowRecords, int64(st.OverflowRecords))
		for i, a := range s.Aggs {
			set := metric.WithAttributeSet(attribute.NewSet(attribute.String("aggregation", a.Name)))
			o.ObserveInt64(t.WindowAggregatorActiveSeries, st.ActiveSeries[i], set)
			var ov int64
			if st.OverflowActive[i] {
				ov = 1
			}
			o.ObserveInt64(t.WindowAggregatorOverflowSeries, ov, set)
			if a.Signal.Points {
				o.ObserveInt64(t.WindowAggregatorInputStreams, int64(s.Inputs.Held(i)), set)
			}
		}
		if st.Watermark != stream.NoWatermark {
			o.ObserveFloat64(t.WindowAggregatorWatermarkLag, float64(s.Engine.Now()-st.Watermark)/1e9, ingest.HeldByOptions[st.HeldBy])
		}
		if len(s.cfg.Watermark.PerSource) > 0 {
			o.ObserveInt64(t.WindowAggregatorWatermarkSources, int64(st.Sources))
		}
		o.ObserveInt64(t.WindowAggregatorPendingPoints, int64(s.emitter.Pending()))
		if s.dedup != nil {
			o.ObserveInt64(t.WindowAggregatorDedupIdentities, int64(s.dedup.Len()))
		}
		return nil
	}, t.WindowAggregatorDedupIdentities, t.WindowAggregatorActiveSeries, t.WindowAggregatorOverflowSeries, t.WindowAggregatorWatermarkLag, t.WindowAggregatorPendingPoints, t.WindowAggregatorWindowsFired, t.WindowAggregatorLateFirings, t.WindowAggregatorOverflowRecords, t.WindowAggregatorWatermarkSources, t.WindowAggregatorInputStreams)
	t.Registration = reg
	return err
}

// moduleVersion is the version of this module in the running binary, for the instrumentation scope.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == metadata.ScopeName {
				if d.Replace != nil && d.Replace.Version != "" {
					return d.Replace.Version
				}
				return d.Version
			}
		}
		if bi.Main.Path == metadata.ScopeName && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "devel"
}

// addSink registers a metrics output taking the results of input.
func (s *shared) addSink(next consumer.Metrics, input int) *delivery.Sink {
	return s.emitter.AddSink(next, input)
}

// start runs with every instance's Start; the first one restores state and starts the ticker. It
// holds no lock while restoring (see the lock order in doc.go).
func (s *shared) start(ctx context.Context, host component.Host) error {
	if !s.emitter.HasSinks() {
		return fmt.Errorf("%s: no metrics pipeline takes its results: add it to a metrics pipeline (as a connector: as a receiver of one; as a processor: to one's processors)", s.id)
	}
	s.health.watch(host)
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return nil
	}
	s.started = true
	s.mu.Unlock()
	view.Register(s)
	s.Inputs.Since = s.Engine.Now() // unless the checkpoint restored says since when
	logMemoryEstimate(s.logger, s.cfg, s.Aggs)
	if s.storage != nil {
		if err := s.storage.Start(ctx, host); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.instances > 0 && s.stop == nil {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.tick(s.stop, s.done)
	}
	return nil
}

// tick is the component's goroutine: it collects what fired when the ingest path asks (see
// Emitter.Poke), and on the emit interval applies the idle rule, collects late firings, retries
// deliveries and forgets the identities W has passed; on its own interval it checkpoints. Deliveries run in a goroutine of their own (Emitter.Run), so that a
// stalled consumer holds up neither.
func (s *shared) tick(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	delivered := make(chan struct{})
	go s.emitter.Run(stop, delivered)
	defer func() { <-delivered }()
	t := time.NewTicker(s.cfg.Emit.Interval)
	defer t.Stop()
	// Checkpoints on a ticker of their own, so that they come on schedule, not at the next emit tick
	// after it; a firing takes one besides (see collect).
	var checkpoints <-chan time.Time
	if s.storage != nil && s.cfg.Checkpoint.Interval > 0 {
		ck := time.NewTicker(s.cfg.Checkpoint.Interval)
		defer ck.Stop()
		checkpoints = ck.C
	}
	for {
		select {
		case <-stop:
			return
		case <-s.emitter.Wake():
			s.collect(context.Background())
		case <-t.C:
			s.collect(context.Background())
			if s.dedup != nil { // identities whose records W has expired: a copy is judged late now
				s.dedup.Forget(s.Engine.Watermark())
			}
		case <-checkpoints:
			s.storage.Save(context.Background())
		}
	}
}

// collect takes what fired into the emitter's queue and, with storage, a checkpoint that holds it:
// with storage, a result goes out only once a checkpoint holds it.
func (s *shared) collect(ctx context.Context) {
	if s.emitter.Collect(ctx) && s.storage != nil {
		s.storage.Save(ctx)
	}
}

// A feed is what brings records of one input signal. The collector feeds a connector's traces->X
// instances from the same pipelines (and its logs->X instances likewise), so they count as one feed,
// which ends with the first of them to shut down: the pipelines in front of it have shut down, and
// they feed the others too. Each processor instance in a traces or logs pipeline is a feed of its own.
func (s *shared) addFeed(input int, connector bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if connector {
		s.connectorFeeds[input]++
	} else {
		s.processorFeeds[input]++
	}
}

// endFeed records that a feed's instance is shutting down.
func (s *shared) endFeed(input int, connector bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if connector {
		s.connectorDone[input] = true
	} else {
		s.processorFeeds[input]--
	}
}

// inputEnded reports whether no running instance can bring records of input any more (under mu).
func (s *shared) inputEnded(input int) bool {
	return (s.connectorFeeds[input] == 0 || s.connectorDone[input]) && s.processorFeeds[input] == 0
}

// shutdownInstance is every instance's Shutdown. Without storage, the aggregations that no record can
// reach any more fire every open window as it stands, and so do those whose results no metrics output
// but this one (stopping) could deliver; the watermark does not move, so records that still come to
// another instance are judged as before, never expired because this one stopped. A metrics output
// then delivers what has fired before it returns. With storage nothing fires early: open windows are
// checkpointed by the last instance.
func (s *shared) shutdownInstance(ctx context.Context, feed int, connector bool, sink *delivery.Sink) error {
	s.health.stop() // the collector reports the instances' status from here on
	if feed >= 0 {
		s.endFeed(feed, connector)
	}
	if s.storage == nil {
		s.drainEnded(ctx, sink)
	}
	if sink != nil {
		s.collect(ctx)
		if s.emitter.HoldsAny() {
			s.storage.Save(ctx) // what is queued is then checkpointed, and may go out
		}
		s.emitter.Send(ctx, true)
		s.emitter.StopSink(ctx, sink)
	}
	return s.release(ctx)
}

// drainEnded fires, as they stand, the aggregations whose input has ended or whose results no running
// metrics output other than leaving would take.
func (s *shared) drainEnded(ctx context.Context, leaving *delivery.Sink) {
	s.mu.Lock()
	mask, any := make([]bool, len(s.Aggs)), false
	for i, a := range s.Aggs {
		if s.drained[i] {
			continue
		}
		if in := a.Signal.Input; s.inputEnded(in) || (leaving != nil && !s.emitter.TakenElsewhere(in, leaving)) {
			mask[i], s.drained[i], any = true, true, true
		}
	}
	s.mu.Unlock()
	if any {
		s.emitter.Drain(ctx, mask)
	}
}

// release is every instance's Shutdown; the last one stops the ticker and forgets the state.
func (s *shared) release(ctx context.Context) error {
	registryMu.Lock()
	s.mu.Lock()
	s.instances--
	last := s.instances == 0
	if last {
		delete(registry, s.id)
	}
	stop, done := s.stop, s.done
	s.mu.Unlock()
	registryMu.Unlock()
	if !last {
		return nil
	}
	view.Unregister(s)
	var err error
	if stop != nil {
		close(stop)
		<-done
	}
	if s.storage != nil {
		s.storage.Save(ctx)
		err = errors.Join(err, s.storage.Shutdown(ctx))
	} else {
		// Every instance has stopped: what records came after their outputs had stopped fires now,
		// and is counted as dropped if no output is left to take it.
		s.emitter.FireAll(ctx)
	}
	s.Reporter.Telemetry.Shutdown()
	return err
}

// stateFingerprint describes what the state of the aggregations means (names, signals, filters, group_by,
// values, weights, outputs), so that a checkpoint is not restored into another configuration: its
// series keys would be read against other group-by keys, its counts be of other records or weights.
// fmt prints maps with sorted keys, so it is stable.
//
// The histogram's form is left out: the engine's snapshot checks what of it is state (the explicit
// buckets), and an exponential max_size shapes the output only. So are exemplars, which a snapshot
// restores into any number of them.
func stateFingerprint(cfg *Config) string {
	// Where is printed by value: fmt prints a pointer nested in a slice as its address, which would
	// make every configuration with a where clause refuse its own checkpoints after a restart. The
	// weight is the one in effect, so that writing out its default changes nothing.
	type stateFields struct {
		Name    string
		Signal  SignalName
		Where   WhereConfig
		GroupBy []GroupByKey
		Value   ValueConfig
		Unit    Unit
		Weight  Weight
		Outputs []string
	}
	aggs := make([]stateFields, len(cfg.Aggregations))
	for i, a := range cfg.Aggregations {
		var where WhereConfig
		if a.Where != nil {
			where = *a.Where
		}
		aggs[i] = stateFields{a.Name, a.Signal, where, a.GroupBy, a.Value, a.Unit, a.weight(), a.Outputs}
	}
	return fmt.Sprintf("%+v", aggs)
}

// newDedup returns the component's remembered identities, one set for every signal, and, by input,
// the set of each signal whose records are deduplicated (nil: none).
func newDedup(cfg *Config) (set *dedup.Set, byInput [ingest.NumInputs]*dedup.Set) {
	if !cfg.Dedup.Enabled {
		return nil, byInput
	}
	set = dedup.New(cfg.Dedup.MaxIDs, dedup.SliceShift(int64(cfg.Window.slide())))
	for input, sg := range ingest.Signals {
		if sg != ingest.LogSignal || cfg.Dedup.Logs != nil {
			byInput[input] = set
		}
	}
	return set, byInput
}

// logKeyOf returns the set of parts.
func logKeyOf(parts []LogPart) ingest.LogKey {
	var k ingest.LogKey
	for _, p := range parts {
		k |= 1 << slices.Index(logParts[:], p)
	}
	return k
}
