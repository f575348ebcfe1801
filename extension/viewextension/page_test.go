package viewextension

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The page as served: HTML that says when no component runs, refers to nothing outside itself (no
// script, style, font or image fetched from elsewhere), fetches only the view's own JSON (the
// page itself, the history of readings, and a series for the explainer), and
// refuses query parameters and other methods.
func TestPageServedAlone(t *testing.T) {
	base := startView(t)
	code, body := get(t, http.MethodGet, base+"/")
	if code != http.StatusOK || !strings.Contains(body, "No window_aggregator component is running") {
		t.Fatalf("GET /: %d, want 200 and the page saying no component runs:\n%s", code, body)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|@import|url\(|<link`).FindString(body); m != "" {
		t.Errorf("the page refers to something outside itself: %q", m)
	}
	for _, m := range regexp.MustCompile(`fetch\("([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if m[1] != "/" && !strings.HasPrefix(m[1], "/api/v1/series?") && m[1] != "/api/v1/history" {
			t.Errorf("the page fetches %q", m[1])
		}
	}
	if code, _ := get(t, http.MethodGet, base+"/?x=1"); code != http.StatusBadRequest {
		t.Errorf("GET /?x=1: %d, want 400", code)
	}
	if code, _ := get(t, http.MethodPost, base+"/"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", code)
	}
	if code, _ := get(t, http.MethodGet, base+"/nothing"); code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d, want 404", code)
	}
}
