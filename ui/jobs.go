package ui

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq"
)

// jobStates are the states the jobs page offers, in a job's life order.
var jobStates = []bq.JobState{bq.StateWaiting, bq.StateScheduled, bq.StateBlocked, bq.StateReady, bq.StateRunning,
	bq.StateFailed, bq.StateCompleted, bq.StateDiscarded, bq.StateCancelled}

// jobsForm is the jobs page's filter form, as typed: shown back as it was.
type jobsForm struct {
	Kind, Queue, Key, KeyPrefix, Meta, Tag string
	CreatedAfter, CreatedBefore            string
	FinishedAfter, FinishedBefore          string
	Limit                                  string
	States                                 map[bq.JobState]bool
}

// jobsData is the jobs page: the form, a page of jobs and the link on.
type jobsData struct {
	Form   jobsForm
	States []bq.JobState
	Page   bq.JobPage
	// Next is the path of the next page; "" on the last.
	Next string
	// Problem says what is wrong with the filter; no jobs are listed then.
	Problem string
}

// jobList lists jobs by the filters of its form (GET parameters), a page
// at a time, each row linking to the job's page.
func (s *server) jobList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := jobsForm{Kind: q.Get("kind"), Queue: q.Get("queue"), Key: q.Get("key"), KeyPrefix: q.Get("key_prefix"),
		Meta: q.Get("meta"), Tag: q.Get("tag"), CreatedAfter: q.Get("created_after"), CreatedBefore: q.Get("created_before"),
		FinishedAfter: q.Get("finished_after"), FinishedBefore: q.Get("finished_before"), Limit: q.Get("limit"),
		States: map[bq.JobState]bool{}}
	for _, st := range q["state"] {
		form.States[bq.JobState(st)] = true
	}
	d := jobsData{Form: form, States: jobStates}
	f, err := form.filter(q["state"], q.Get("after"))
	if err == nil {
		d.Page, err = s.client.ListJobs(r.Context(), f)
	}
	if errors.Is(err, bq.ErrInvalidFilter) || errors.Is(err, errBadForm) {
		d.Problem = err.Error()
		s.render(w, r, http.StatusBadRequest, "jobs", view{Title: "Jobs", Nav: "jobs", Data: d})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Page.Next != "" {
		next := maps.Clone(q)
		next.Set("after", d.Page.Next)
		d.Next = "/jobs/?" + next.Encode()
	}
	s.render(w, r, http.StatusOK, "jobs", view{Title: "Jobs", Nav: "jobs", Data: d})
}

// errBadForm wraps a form field ListJobs never sees (a time, a number).
var errBadForm = errors.New("invalid form field")

// filter reads the form: lists comma-separated, metadata as k=v pairs.
func (f jobsForm) filter(states []string, after string) (bq.JobFilter, error) {
	jf := bq.JobFilter{Kinds: fields(f.Kind), Queues: fields(f.Queue), Key: strings.TrimSpace(f.Key),
		KeyPrefix: strings.TrimSpace(f.KeyPrefix), Tag: strings.TrimSpace(f.Tag), After: after}
	for _, st := range states {
		if st != "" {
			jf.States = append(jf.States, bq.JobState(st))
		}
	}
	for _, pair := range fields(f.Meta) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return jf, fmt.Errorf("%w: metadata %q is no pair: write key=value, several separated by commas", errBadForm, pair)
		}
		if jf.Metadata == nil {
			jf.Metadata = map[string]string{}
		}
		jf.Metadata[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	for _, t := range []struct {
		name, value string
		into        *time.Time
	}{
		{"created after", f.CreatedAfter, &jf.CreatedAfter}, {"created before", f.CreatedBefore, &jf.CreatedBefore},
		{"finished after", f.FinishedAfter, &jf.FinishedAfter}, {"finished before", f.FinishedBefore, &jf.FinishedBefore},
	} {
		at, err := formTime(t.value)
		if err != nil {
			return jf, fmt.Errorf("%w: %s %q: %v", errBadForm, t.name, t.value, err)
		}
		*t.into = at
	}
	if l := strings.TrimSpace(f.Limit); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return jf, fmt.Errorf("%w: limit %q: write a whole number of jobs, 1 to %d", errBadForm, l, bq.MaxListLimit)
		}
		jf.Limit = n
	}
	return jf, nil
}

// formTime reads a time as typed in the form: RFC 3339, or a date and
// time (a datetime-local input) or a date alone, in UTC.
func formTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("write 2026-12-01T09:00:00Z (RFC 3339), 2026-12-01T09:00 or 2026-12-01 (UTC)")
}

// fields splits a comma-separated form field, dropping blanks.
func fields(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// labels is a job's metadata and tags as the pages show them.
func labels(md map[string]string, tags []string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(md)) {
		out = append(out, k+"="+md[k])
	}
	for _, t := range tags {
		out = append(out, "#"+t)
	}
	return out
}

// jobsURL is the jobs page filtered by one parameter.
func jobsURL(param, value string) string {
	return "/jobs/?" + url.Values{param: {value}}.Encode()
}
