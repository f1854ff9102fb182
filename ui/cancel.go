package ui

import (
	"fmt"
	"net/http"

	"github.com/bqueue/bq"
)

// cancel cancels a job by hand (the Cancel button of the job page and of
// the failed page), as client.Cancel: at once unless it is running, whose
// run is asked to stop.
func (s *server) cancel(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "cancelled", s.client.Cancel)
}

// cancellable reports whether a job in state s can be cancelled: it has
// not finished, and no cancel is already pending on its run.
func cancellable(s bq.JobState, pending bool) bool {
	switch s {
	case bq.StateReady, bq.StateBlocked, bq.StateScheduled, bq.StateFailed, bq.StateWaiting:
		return true
	case bq.StateRunning:
		return !pending
	}
	return false
}

// cancelSaid is the notice of a cancel that left the job running: its run
// is being stopped, and the job ends when the run returns.
func cancelSaid(id int64, now bq.JobState) string {
	if now == bq.StateRunning {
		return fmt.Sprintf("Job %d: cancel requested; its run is being stopped, and the job ends (and frees its slot) when the run returns.", id)
	}
	return fmt.Sprintf("Job %d: cancel requested; its run ended and it is now %s.", id, now)
}
