package ui

import (
	"net/http"

	"github.com/bqueue/bq"
)

// periodic shows the schedules the fleet runs (Config.Periodic of the
// processes that have the job code): next tick, last tick and its job.
func (s *server) periodic(w http.ResponseWriter, r *http.Request) {
	ps, err := s.client.PeriodicJobs(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "periodic", view{Title: "Periodic jobs", Nav: "periodic",
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: periodicData{Periodic: ps}})
}

type periodicData struct {
	Periodic []bq.PeriodicStatus
}
