package windowaggregator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/processor/clock"
	"github.com/windowaggregator/windowaggregator/processor/stream"
)

// shared is the state of one component id, common to every instance of it in both forms: one engine,
// one watermark, one emitter. It is created with the first instance, started with the first Start,
// and torn down when the last instance shuts down.
type shared struct {
	id     component.ID
	cfg    *Config
	logger *zap.Logger
	aggs   []*aggregation
	// aggregations per input signal
	spanAggs, logAggs []*aggregation
	// whether some span aggregation reads the span kind or the status code: a span's status lies
	// apart from the fields every aggregation reads, so reading it only when needed saves a cache line
	readKind, readStatus bool
	engine               *stream.Engine
	tel                  *telemetry
	emitter              *emitter
	storage              *checkpointer

	mu        sync.Mutex
	instances int // created and not yet shut down
	started   bool
	sinks     []*sink
	// The consumers of a connector's traces->traces and logs->logs instances: they aggregate their
	// signal (so that the ->metrics instance, handed the same batches, does not) and route late data.
	lateTraces consumer.Traces
	lateLogs   consumer.Logs
	stop       chan struct{}
	done       chan struct{}
}

var (
	registryMu sync.Mutex
	registry   = map[component.ID]*shared{}
)

// minWatermark is what Engine.Watermark returns while no record has been accepted.
const minWatermark = math.MinInt64

// testClock, when set by a test, replaces the system clock of engines created afterwards.
var testClock clock.Clock

// acquire returns the shared state of id, creating it with the first instance.
func acquire(set component.TelemetrySettings, id component.ID, cfg *Config) (*shared, error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s, ok := registry[id]; ok {
		if !reflect.DeepEqual(s.cfg, cfg) {
			return nil, fmt.Errorf("%s: every instance of one component id shares one state, but this one is configured differently from another (a processor and a connector with the same id must have the same settings; give them different names)", id)
		}
		s.mu.Lock()
		s.instances++
		s.mu.Unlock()
		return s, nil
	}
	s, err := newShared(set, id, cfg)
	if err != nil {
		return nil, err
	}
	s.instances = 1
	registry[id] = s
	return s, nil
}

func newShared(set component.TelemetrySettings, id component.ID, cfg *Config) (*shared, error) {
	s := &shared{id: id, cfg: cfg, logger: set.Logger}
	ecfg := stream.Config{
		Size: cfg.Window.Size, Slide: cfg.Window.Slide,
		MaxOutOfOrderness: cfg.Watermark.MaxOutOfOrderness, IdleTimeout: cfg.Watermark.IdleTimeout,
		MaxFutureSkew: cfg.Watermark.MaxFutureSkew, AllowedLateness: cfg.AllowedLateness,
		Clock: testClock,
	}
	for i, ac := range cfg.Aggregations {
		a, err := compileAggregation(i, ac)
		if err != nil {
			return nil, err
		}
		s.aggs = append(s.aggs, a)
		if a.signal == signalLogs {
			s.logAggs = append(s.logAggs, a)
		} else {
			s.spanAggs = append(s.spanAggs, a)
			kind, status := a.readsSpanFields()
			s.readKind, s.readStatus = s.readKind || kind, s.readStatus || status
		}
		ecfg.Aggregations = append(ecfg.Aggregations, a.engineAggregation(cfg.MaxSeries))
	}
	var err error
	if s.engine, err = stream.New(ecfg); err != nil {
		return nil, err
	}
	if s.tel, err = newTelemetry(set.MeterProvider); err != nil {
		return nil, err
	}
	s.emitter = &emitter{s: s}
	v := moduleVersion()
	for i := range s.emitter.builders {
		s.emitter.builders[i] = newMetricsBuilder(s.aggs, v)
	}
	if err := s.tel.observe(set.MeterProvider, s); err != nil {
		return nil, err
	}
	if cfg.Storage != nil {
		s.storage = newCheckpointer(s)
	}
	return s, nil
}

// moduleVersion is the version of this module in the running binary, for the instrumentation scope.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == scopeName {
				if d.Replace != nil && d.Replace.Version != "" {
					return d.Replace.Version
				}
				return d.Version
			}
		}
		if bi.Main.Path == scopeName && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "devel"
}

// addSink registers a metrics output.
func (s *shared) addSink(next consumer.Metrics, input int) *sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &sink{next: next, input: input}
	s.sinks = append(s.sinks, k)
	return k
}

// sinksFor returns the running sinks that take results of aggregations on input: those fed by the
// same signal (or the processor's), else, when there is none, every running sink.
func (s *shared) sinksFor(input int) []*sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	var match, all []*sink
	for _, k := range s.sinks {
		if k.stopped {
			continue
		}
		all = append(all, k)
		if k.input == input || k.input == inputAny {
			match = append(match, k)
		}
	}
	if len(match) > 0 {
		return match
	}
	return all
}

// hasSinks reports whether any metrics output was ever registered.
func (s *shared) hasSinks() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sinks) > 0
}

// start runs with every instance's Start; the first one restores state and starts the ticker. It
// holds no lock while restoring: the restore takes the emitter's lock, which is taken before s.mu.
func (s *shared) start(ctx context.Context, host component.Host) error {
	s.mu.Lock()
	if len(s.sinks) == 0 {
		s.mu.Unlock()
		return fmt.Errorf("%s: no metrics pipeline takes its results: add it to a metrics pipeline (as a connector: as a receiver of one; as a processor: to one's processors)", s.id)
	}
	if s.started {
		s.mu.Unlock()
		return nil
	}
	s.started = true
	s.mu.Unlock()
	if s.storage != nil {
		if err := s.storage.start(ctx, host); err != nil {
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

// tick applies the idle rule, sends late firings and retries, and checkpoints, on the emit interval.
func (s *shared) tick(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.cfg.Emit.Interval)
	defer t.Stop()
	lastCheckpoint := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.emitter.emit(context.Background(), false)
			if s.storage != nil && s.cfg.Checkpoint.Interval > 0 && time.Since(lastCheckpoint) >= s.cfg.Checkpoint.Interval {
				s.storage.save(context.Background())
				lastCheckpoint = time.Now()
			}
		}
	}
}

// shutdownSink is a metrics output's Shutdown: it delivers its final results before returning. With
// storage, it sends what has fired (what it cannot deliver stays queued, and the last instance's
// release checkpoints it with the open windows); without, every open window fires now.
func (s *shared) shutdownSink(ctx context.Context, k *sink) error {
	if s.storage != nil {
		s.emitter.emit(ctx, false)
	} else {
		s.emitter.fireAll(ctx)
	}
	s.emitter.stopSink(ctx, k)
	return s.release(ctx)
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
	var err error
	if stop != nil {
		close(stop)
		<-done
	}
	if s.storage != nil {
		s.storage.save(ctx)
		err = errors.Join(err, s.storage.shutdown(ctx))
	}
	s.tel.shutdown()
	return err
}
