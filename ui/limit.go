package ui

import (
	"fmt"
	"net/http"
	"strings"
)

// limitInFlight lets at most n requests other than assets run at once:
// each page runs several queries, and a flood of them would compete with
// the queue's own work for the database. The excess gets 503 at once,
// with Retry-After; the live refresh simply tries again at its next tick.
func limitInFlight(n int, next http.Handler) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/assets/") {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("the dashboard is busy: it serves %d pages at once (Options.MaxInFlight); try again in a moment", n),
				http.StatusServiceUnavailable)
		}
	})
}
