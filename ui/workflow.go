package ui

import (
	"net/http"

	"github.com/bqueue/bq"
)

// workflow shows a workflow's graph: its tasks by level, each with its
// job's state and the tasks it runs after.
func (s *server) workflow(w http.ResponseWriter, r *http.Request) {
	wf, err := s.client.Workflow(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := workflowData{Workflow: wf}
	for _, t := range wf.Tasks {
		if t.Level == len(d.Levels) {
			d.Levels = append(d.Levels, nil)
		}
		d.Levels[t.Level] = append(d.Levels[t.Level], t)
	}
	s.render(w, r, http.StatusOK, "workflow", view{Title: "Workflow " + wf.Name, Nav: "jobs",
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: d})
}

type workflowData struct {
	Workflow *bq.WorkflowState
	// Levels are the graph's columns: the tasks after none first, each
	// task one column right of the last it runs after.
	Levels [][]bq.WorkflowTask
}
