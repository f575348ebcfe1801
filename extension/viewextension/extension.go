package viewextension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator"
)

func confighttpDefault() confighttp.ServerConfig {
	sc := confighttp.NewDefaultServerConfig()
	sc.NetAddr.Endpoint = defaultEndpoint
	return sc
}

// defaultTop and maxTop bound the lists of a response (sources, windows): the first defaultTop
// unless ?top=N asks for others, at most maxTop, whatever the number of series.
const defaultTop, maxTop = 20, 1000

type viewExtension struct {
	cfg    *Config
	set    extension.Settings
	server *http.Server
	addr   string // where it listens
	done   chan struct{}
	// history is read every sampleEvery by a goroutine that stops when stop is closed, and sampled
	// is closed once it has.
	history       *history
	stop, sampled chan struct{}
}

func (x *viewExtension) Start(ctx context.Context, host component.Host) error {
	ln, err := x.cfg.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("window_aggregator_view: cannot listen on %s: %w", x.cfg.NetAddr.Endpoint, err)
	}
	x.history = newHistory()
	x.server, err = x.cfg.ToServer(ctx, host.GetExtensions(), x.set.TelemetrySettings, handler(x.history))
	if err != nil {
		_ = ln.Close()
		return err
	}
	x.addr, x.done = ln.Addr().String(), make(chan struct{})
	go func() {
		defer close(x.done)
		if err := x.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			x.set.Logger.Error("The window_aggregator view stopped serving", zap.Error(err))
		}
	}()
	x.stop, x.sampled = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(x.sampled)
		ticker := time.NewTicker(sampleEvery)
		defer ticker.Stop()
		x.history.sample(ticker.C, x.stop)
	}()
	x.set.Logger.Info("Serving the window_aggregator view", zap.String("address", "http://"+ln.Addr().String()+"/"))
	return nil
}

func (x *viewExtension) Shutdown(ctx context.Context) error {
	if x.server == nil {
		return nil
	}
	close(x.stop)
	<-x.sampled
	err := x.server.Shutdown(ctx)
	<-x.done
	return err
}

// handler serves the view, read only: GET and HEAD, else 405; the charts' readings from h.
func handler(h *history) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/history", readOnly(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.Query()) > 0 {
			http.Error(w, "the history takes no query parameter", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.read())
	}))
	mux.HandleFunc("/api/v1/components", readOnly(func(w http.ResponseWriter, r *http.Request) {
		top, err := topOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(windowaggregator.Views(top))
	}))
	mux.HandleFunc("/api/v1/series", readOnly(func(w http.ResponseWriter, r *http.Request) {
		id, agg, values, err := seriesOf(r)
		if err == nil {
			var ex windowaggregator.SeriesExplanation
			if ex, err = windowaggregator.Explain(id, agg, values); err == nil {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(ex)
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
	}))
	mux.HandleFunc("/", readOnly(servePage))
	return mux
}

// readOnly answers 405 to any method but GET and HEAD.
func readOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	}
}

// topOf reads ?top=N, the most sources and windows listed: 1 to maxTop, defaultTop without it; any
// other query parameter is refused.
func topOf(r *http.Request) (int, error) {
	q := r.URL.Query()
	for k := range q {
		if k != "top" {
			return 0, fmt.Errorf("unknown query parameter %q: the only one is top", k)
		}
	}
	s := q.Get("top")
	if s == "" {
		return defaultTop, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxTop {
		return 0, fmt.Errorf("top must be a whole number from 1 to %d, got %q", maxTop, s)
	}
	return n, nil
}

// seriesOf reads the series an operator names: ?component=ID&aggregation=NAME&key.<group_by
// key>=<value>..., each group_by key the series has.
func seriesOf(r *http.Request) (id, agg string, values map[string]string, err error) {
	values = map[string]string{}
	for k, vs := range r.URL.Query() {
		switch {
		case len(vs) != 1:
			return "", "", nil, fmt.Errorf("query parameter %q is given %d times", k, len(vs))
		case k == "component":
			id = vs[0]
		case k == "aggregation":
			agg = vs[0]
		case strings.HasPrefix(k, "key.") && len(k) > len("key."):
			values[strings.TrimPrefix(k, "key.")] = vs[0]
		default:
			return "", "", nil, fmt.Errorf("unknown query parameter %q: the series is named by component, aggregation and key.<group_by key>", k)
		}
	}
	if id == "" || agg == "" {
		return "", "", nil, errors.New("name the series: component, aggregation and key.<group_by key> for each of its values")
	}
	return id, agg, values, nil
}
