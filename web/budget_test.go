package web_test

import (
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/claudectl/claudectl/web"
)

// firstLoadBudget bounds what a browser downloads to show the page: the
// JavaScript and CSS index.html names, gzip'd as the daemon serves them.
// The activity view's chunk (uPlot) is loaded when it is opened, not here.
const firstLoadBudget = 120 << 10

// TestFirstLoadBudget: the first load stays under 120 KB of gzip'd
// JavaScript and CSS.
func TestFirstLoadBudget(t *testing.T) {
	h := web.Handler()
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Accept-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		return w
	}
	index := get("/").Body.String()
	assets := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+\.(?:js|css))"`).FindAllStringSubmatch(index, -1)
	if len(assets) < 2 {
		t.Fatalf("index.html names %d scripts and style sheets:\n%s", len(assets), index)
	}
	total := 0
	for _, a := range assets {
		w := get(a[1])
		if w.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("%s is not served gzip'd", a[1])
		}
		t.Logf("%s: %d bytes gzip'd", a[1], w.Body.Len())
		total += w.Body.Len()
	}
	t.Logf("first load: %d bytes of gzip'd JavaScript and CSS (budget %d)", total, firstLoadBudget)
	if total >= firstLoadBudget {
		t.Errorf("the first load is %d bytes of gzip'd JavaScript and CSS; the budget is %d: load a view's libraries on first use (as the activity view does)", total, firstLoadBudget)
	}
}
