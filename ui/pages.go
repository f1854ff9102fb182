package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/humanize"
)

// overviewData sums the report for the overview's cards.
type overviewData struct {
	Health                                                         *bq.Health
	Ready, Running, Scheduled, Blocked, Waiting, Failed, Saturated int
	Fleet                                                          fleet
	// Charts are the last hour's throughput and depth; HistoryErr says
	// why there are none.
	Charts     []chart
	HistoryErr string
	// Policies are the stored queue policies (SyncPolicies).
	Policies []bq.StoredPolicy
}

func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	h, err := s.client.Health(r.Context(), bq.HealthOptions{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := overviewData{Health: h, Fleet: fleetOf(h)}
	if d.Policies, err = s.client.ListPolicies(r.Context()); err != nil {
		s.fail(w, r, err)
		return
	}
	// The counts matter more than the pictures: a history that cannot
	// be read leaves the rest of the page.
	if hist, err := s.client.History(r.Context(), bq.HistoryOptions{}); err != nil {
		s.opts.Logger.Error("bq ui: read the history", "error", err)
		d.HistoryErr = "the server's log has the error"
	} else {
		d.Charts = historyCharts(hist, time.Minute, false)
	}
	for _, q := range h.Queues {
		d.Ready += q.Ready
		d.Running += q.Running
		d.Scheduled += q.Scheduled
		d.Blocked += q.Blocked
		d.Waiting += q.Waiting
		d.Failed += q.Failed
	}
	for _, g := range h.Groups {
		d.Saturated += g.Saturated
	}
	s.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Notice: s.notice(w, r),
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: d})
}

func (s *server) blocked(w http.ResponseWriter, r *http.Request) {
	h, err := s.client.Health(r.Context(), bq.HealthOptions{TopKeys: 100})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "blocked", view{Title: "Blocked work", Nav: "blocked",
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: h})
}

func (s *server) key(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		s.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad request", Data: "Name a key: /key?key=group/key."})
		return
	}
	// A key that breaks the key rule (too long, not UTF-8, NUL) is bad
	// input to KeyState as to every API: 400, never a database error.
	k, err := s.client.KeyState(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	weight, err := s.keyWeight(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pause, err := s.keyPause(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "key", view{Title: "Key " + key, Nav: "blocked", Notice: s.notice(w, r),
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: keyData{KeyState: k, Weight: weight, Pause: pause}})
}

// jobData is a job's page. Args and Error are what the page shows of
// them, at most renderCap bytes; the Cut ones have more, one download away.
type jobData struct {
	Job                 *bq.JobInfo
	Explain             *bq.Explanation
	Args, Error         string
	ArgsCut, ErrorCut   bool
	ArgsSize, ErrorSize int
}

// findJob keeps the former header's job search working for links and
// bookmarks: /jobs/?id=42 goes to /jobs/42 (the header now searches).
func (s *server) findJob(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("id") {
		s.jobList(w, r)
		return
	}
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", s.opts.Path, id), http.StatusSeeOther)
}

func (s *server) job(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r)
		return
	}
	e, err := s.client.Explain(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := jobData{Job: e.Job, Explain: e, ArgsSize: len(e.Job.Args), ErrorSize: len(e.Job.LastError)}
	d.Args, d.ArgsCut = showArgs(e.Job.Args)
	d.Error, d.ErrorCut = humanize.Clip(e.Job.LastError, renderCap)
	s.render(w, r, http.StatusOK, "job", view{Title: fmt.Sprintf("Job %d", id), Nav: "jobs",
		Notice: s.notice(w, r), Data: d})
}

// rawArgs serves a job's args as a download.
func (s *server) rawArgs(w http.ResponseWriter, r *http.Request) {
	s.raw(w, r, "args.json", "application/json", func(j *bq.JobInfo) string { return string(j.Args) })
}

// rawError serves a job's last error as a download.
func (s *server) rawError(w http.ResponseWriter, r *http.Request) {
	s.raw(w, r, "error.txt", "text/plain; charset=utf-8", func(j *bq.JobInfo) string { return j.LastError })
}

// raw serves one value of a job as an attachment of at most rawCap
// bytes; X-Bq-Size tells its whole size.
func (s *server) raw(w http.ResponseWriter, r *http.Request, name, contentType string, value func(*bq.JobInfo) string) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r)
		return
	}
	j, err := s.client.Job(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := value(j)
	shown, _ := humanize.Clip(v, rawCap)
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="job-%d-%s"`, id, name))
	h.Set("X-Bq-Size", strconv.Itoa(len(v)))
	_, _ = io.WriteString(w, shown)
}

// failedData is a page of failed jobs.
type failedData struct {
	Jobs []bq.FailedJob
	Next int64 // before= of the next page; 0 for none
}

const failedPage = 50

func (s *server) failed(w http.ResponseWriter, r *http.Request) {
	before, _ := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	jobs, err := s.client.FailedJobs(r.Context(), before, failedPage)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := failedData{Jobs: jobs}
	if len(jobs) == failedPage {
		d.Next = jobs[len(jobs)-1].JobID
	}
	s.render(w, r, http.StatusOK, "failed", view{Title: "Failed jobs", Nav: "failed", Notice: s.notice(w, r), Data: d})
}

// processesData is the processes page.
type processesData struct {
	Health *bq.Health
	Fleet  fleet
}

func (s *server) processes(w http.ResponseWriter, r *http.Request) {
	h, err := s.client.Health(r.Context(), bq.HealthOptions{TopKeys: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "processes", view{Title: "Processes", Nav: "processes",
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: processesData{Health: h, Fleet: fleetOf(h)}})
}

func (s *server) retry(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "retried", s.client.RetryFailed)
}

func (s *server) discard(w http.ResponseWriter, r *http.Request) {
	s.act(w, r, "discarded", func(ctx context.Context, id int64) (bq.JobState, error) {
		return bq.StateDiscarded, s.client.DiscardFailed(ctx, id)
	})
}

// act runs a POSTed action on a job (retry, discard, cancel), then redirects (303) to the
// form's next page, which tells what the action made of the job and what
// it is now (see tell).
func (s *server) act(w http.ResponseWriter, r *http.Request, done string, action func(context.Context, int64) (bq.JobState, error)) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.notFound(w, r)
		return
	}
	if !s.formOK(w, r) {
		return
	}
	state, err := action(r.Context(), id)
	if err != nil {
		if errors.Is(err, bq.ErrJobNotFailed) || errors.Is(err, bq.ErrJobNotFound) || errors.Is(err, bq.ErrJobFinished) {
			s.render(w, r, http.StatusConflict, "error", view{Title: "Nothing to do", Data: err.Error()})
			return
		}
		s.fail(w, r, err)
		return
	}
	next := r.PostFormValue("next")
	if !localPath(next) {
		next = fmt.Sprintf("/jobs/%d", id)
	}
	s.tell(w, r, done, id, state)
	http.Redirect(w, r, s.opts.Path+next, http.StatusSeeOther)
}
