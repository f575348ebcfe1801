package viewextension

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The history, fed readings by hand: at most historyLength per component id, earliest first; a
// component id that stops running is dropped after historyLength readings without it; one that comes
// back with other aggregations starts again. GET /api/v1/history serves it, read only, keyed by
// aggregation name; ?since= serves the readings taken after a time.
func TestHistory(t *testing.T) {
	h := newHistory()
	at := func(i int) time.Time { return time.Unix(int64(1000+i), 0).UTC() }
	reading := func(id string, i, aggs int) view.ComponentSample {
		r := view.ComponentSample{ID: id, WallClock: at(i), Records: map[string]view.RecordCounts{"x": {OnTime: uint64(i)}}}
		if aggs == 2 {
			r.Records["y"] = view.RecordCounts{}
		}
		return r
	}
	for i := range historyLength + 5 {
		batch := []view.ComponentSample{reading("a", i, 1)}
		if i < 10 { // then absent for historyLength-5 readings
			batch = append(batch, reading("b", i, 2))
		}
		h.add(batch)
	}
	got := h.read(time.Time{})
	if len(got) != 2 || got[0].ID != "a" || len(got[0].Samples) != historyLength || !got[0].Samples[0].WallClock.Equal(at(5)) ||
		!got[0].Samples[historyLength-1].WallClock.Equal(at(historyLength+4)) || got[1].ID != "b" || len(got[1].Samples) != 10 {
		t.Fatalf("history of %d ids, a's %d readings", len(got), len(got[0].Samples))
	}
	for i := range 5 {
		h.add([]view.ComponentSample{reading("a", historyLength+5+i, 1)})
	}
	if got := h.read(time.Time{}); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("b absent for %d readings is still held: %d ids", historyLength, len(got))
	}
	if got := h.read(at(historyLength + 7)); len(got) != 1 || len(got[0].Samples) != 2 || !got[0].Samples[0].WallClock.Equal(at(historyLength+8)) {
		t.Fatalf("since %v: %+v, want the last 2 readings", at(historyLength+7), got)
	}
	h.add([]view.ComponentSample{reading("a", 2*historyLength+3, 2)})
	got = h.read(time.Time{})
	if len(got[0].Samples) != 1 || len(got[0].Samples[0].Records) != 2 {
		t.Errorf("a with two aggregations kept %d readings of the one before", len(got[0].Samples)-1)
	}

	srv := httptest.NewServer(handler(h))
	defer srv.Close()
	code, body := get(t, http.MethodGet, srv.URL+"/api/v1/history")
	var served []ComponentHistory
	if err := json.Unmarshal([]byte(body), &served); code != http.StatusOK || err != nil || len(served) != 1 || served[0].ID != "a" ||
		len(served[0].Samples) != 1 || !served[0].Samples[0].WallClock.Equal(at(2*historyLength+3)) {
		t.Errorf("GET /api/v1/history: %d %v %s", code, err, body)
	}
	if !strings.Contains(body, `"records":{"x":{"on_time":603,`) {
		t.Errorf("GET /api/v1/history: the records are not keyed by aggregation: %s", body)
	}
	code, body = get(t, http.MethodGet, srv.URL+"/api/v1/history?since="+at(2*historyLength+3).Format(time.RFC3339Nano))
	if served = nil; json.Unmarshal([]byte(body), &served) != nil || code != http.StatusOK || len(served) != 1 || len(served[0].Samples) != 0 {
		t.Errorf("GET /api/v1/history?since=the last reading: %d %s, want none", code, body)
	}
	if code, _ := get(t, http.MethodPost, srv.URL+"/api/v1/history"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", code)
	}
	for _, q := range []string{"?top=3", "?since=yesterday", "?since=2026-12-07T10:00:00Z&since=2026-12-07T10:00:01Z"} {
		if code, _ := get(t, http.MethodGet, srv.URL+"/api/v1/history"+q); code != http.StatusBadRequest {
			t.Errorf("GET /api/v1/history%s: %d, want 400", q, code)
		}
	}
}
