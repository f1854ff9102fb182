package ui

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestLimitInFlight: with n requests running, the next one gets 503 and
// Retry-After at once, assets still load, and a freed slot serves again.
func TestLimitInFlight(t *testing.T) {
	const n = 4
	entered, release := make(chan struct{}), make(chan struct{})
	h := limitInFlight(n, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
	}))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/slow", nil)) })
		<-entered
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/failed", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("request %d: %d, Retry-After %q; want 503 with Retry-After", n+1, rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/assets/style.css", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("an asset while busy: %d, want 200", rec.Code)
	}
	close(release)
	wg.Wait()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/failed", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("after the slow requests ended: %d, want 200", rec.Code)
	}
}
