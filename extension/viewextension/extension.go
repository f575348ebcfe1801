package viewextension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// maxValueBytes is the longest group_by value the explainer is asked about: a series key's values
// are cut there (truncated_keys).
const maxValueBytes = 4096

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
	x.server, err = x.cfg.ToServer(ctx, host.GetExtensions(), x.set.TelemetrySettings, localOnly(ln.Addr(), x.cfg.NetAddr.Endpoint, handler(x.history)))
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

// Shutdown stops serving; once started, a second call does nothing.
func (x *viewExtension) Shutdown(ctx context.Context) error {
	if x.server == nil {
		return nil
	}
	close(x.stop)
	<-x.sampled
	err := x.server.Shutdown(ctx)
	<-x.done
	x.server = nil
	return err
}

// localOnly refuses (403), when the view listens on a loopback address, a request whose Host is not
// a name of this host: a web page the operator opens elsewhere could otherwise point its own domain
// at 127.0.0.1 (DNS rebinding) and read the view from the operator's browser.
func localOnly(addr net.Addr, endpoint string, h http.Handler) http.Handler {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return h
	}
	configured, _, _ := net.SplitHostPort(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			name = r.Host
		}
		name = strings.Trim(name, "[]")
		ip := net.ParseIP(name)
		if !strings.EqualFold(name, "localhost") && !strings.EqualFold(name, configured) && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, fmt.Sprintf("the view on %s answers requests for localhost only, not for %q", addr, r.Host), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// handler serves the view, read only: GET and HEAD, else 405; the charts' readings from h.
func handler(h *history) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/history", readOnly(func(w http.ResponseWriter, r *http.Request) {
		since, err := sinceOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.read(since))
	}))
	mux.HandleFunc("/api/v1/components", readOnly(func(w http.ResponseWriter, r *http.Request) {
		top, err := topOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(h.views(top))
	}))
	mux.HandleFunc("/api/v1/series", readOnly(func(w http.ResponseWriter, r *http.Request) {
		id, agg, values, err := seriesOf(r)
		if err == nil {
			var ex view.SeriesExplanation
			if ex, err = view.Explain(id, agg, values); err == nil {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(ex)
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
	}))
	mux.HandleFunc("/", readOnly(func(w http.ResponseWriter, r *http.Request) { servePage(w, r, h) }))
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

// sinceOf reads the history's query: since=<RFC 3339 time> asks for the readings taken after it
// (the page's polls); none, for all of them.
func sinceOf(r *http.Request) (time.Time, error) {
	var since time.Time
	for k, vs := range r.URL.Query() {
		if k != "since" {
			return since, fmt.Errorf("unknown query parameter %q: the only one is since", k)
		}
		if len(vs) != 1 {
			return since, fmt.Errorf("query parameter since is given %d times", len(vs))
		}
		t, err := time.Parse(time.RFC3339Nano, vs[0])
		if err != nil {
			return since, fmt.Errorf("query parameter since: %q is not an RFC 3339 time", vs[0])
		}
		since = t
	}
	return since, nil
}

// topOf reads ?top=N, the most sources and windows listed: 1 to maxTop, defaultTop without it; any
// other query parameter is refused.
func topOf(r *http.Request) (int, error) {
	q := r.URL.Query()
	for k, vs := range q {
		if k != "top" {
			return 0, fmt.Errorf("unknown query parameter %q: the only one is top", k)
		}
		if len(vs) != 1 {
			return 0, fmt.Errorf("query parameter top is given %d times", len(vs))
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
			if len(vs[0]) > maxValueBytes {
				return "", "", nil, fmt.Errorf("the value of %q is %d bytes, more than a series key's %d", k, len(vs[0]), maxValueBytes)
			}
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
