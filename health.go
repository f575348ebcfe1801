package windowaggregator

import (
	"errors"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
)

// Health: the component reports, through the collector's component status, a recoverable error
// while its results are dropped or not delivered (a metrics consumer fails, or takes them too slowly)
// or its checkpoints fail, and OK once both have recovered, so that a status watcher such as the
// health_check v2 extension shows it. Every instance of the component id reports it: they share the
// state whose health it is.

// concern is one thing whose failure the component reports: delivery of the results, or checkpoints.
type concern int

const (
	deliveryConcern concern = iota
	checkpointConcern
	numConcerns
)

// health holds the concerns' last errors and the hosts of the running instances; mu is the last
// lock of the order (doc.go), held while it reports, so that reports go out in the order of what
// they report.
type health struct {
	mu     sync.Mutex
	hosts  []component.Host
	errs   [numConcerns]error
	failed bool // the last report was an error
}

// watch adds the host of an instance that started, and tells it of what fails already.
func (h *health) watch(host component.Host) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts = append(h.hosts, host)
	if err := errors.Join(h.errs[:]...); err != nil {
		componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
	}
}

// stop ends the reports: the instances are shutting down, and the collector reports their status.
func (h *health) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosts = nil
}

// set records c's outcome, err (nil: it went well), and reports the component's health: a
// recoverable error naming each concern that fails, at every failure (what the collector reports
// when an instance starts does not hide a failure that comes again) and when one of two recovers,
// and OK when the last recovers.
func (h *health) set(c concern, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	recovered := err == nil && h.errs[c] != nil
	h.errs[c] = err
	all := errors.Join(h.errs[:]...)
	ev := componentstatus.NewEvent(componentstatus.StatusOK)
	switch {
	case err != nil || (recovered && all != nil):
		ev = componentstatus.NewRecoverableErrorEvent(all)
	case all != nil || !h.failed:
		return // another concern still fails, or nothing had
	}
	h.failed = all != nil
	for _, host := range h.hosts {
		componentstatus.ReportStatus(host, ev)
	}
}
