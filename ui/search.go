package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/bqueue/bq"
)

// The header's search box: a job id, a full key (group/key), a group
// (group/), a key's end (/key) or a bare key, a tenant say, which names
// no group; metadata as key=value, and a bare word as a tag and as the
// value of the metadata keys of Options.SearchMetadata too.

// keyRule tells how keys are spelled, for a search that found none.
const keyRule = "Keys are group/key: the group is the job's name unless its Concurrency names a Group, e.g. reports.export/acme. " +
	"Only keys in use are found: those with a ready, running or blocked job, or one lately."

// keyURL is the path of a key's page.
func keyURL(key string) string { return "/key?key=" + url.QueryEscape(key) }

// searchShown bounds each list of keys a search shows.
const searchShown = 50

// searchData is the search page: what was searched and what matched.
type searchData struct {
	Query string
	// Job is the job whose id the query is; nil for none.
	Job *bq.JobInfo
	// Suffix lists the keys that end with "/" + the query; Group those of
	// the group the query names (that start with query + "/").
	Suffix, Group         []bq.KeyHealth
	SuffixMore, GroupMore bool
	GroupName             string
	// Meta lists, for each metadata key searched that has the query as a
	// value in some job, the newest of those jobs.
	Meta []metaFound
	// Tagged lists the newest jobs carrying the query as a tag.
	Tagged     []*bq.JobInfo
	TaggedMore bool
	// Hint, when set, says what to search for instead.
	Hint string
}

// metaFound is the newest jobs whose metadata Key holds the query.
type metaFound struct {
	Key  string
	Jobs []*bq.JobInfo
	More bool
	// List is the Jobs page listing them all; "" when its metadata field
	// cannot spell the query (a comma in it separates pairs there).
	List string
}

// searchHelp says what the box finds.
func (s *server) searchHelp() string {
	value := ""
	if keys := s.opts.SearchMetadata; len(keys) > 0 {
		value = " or a value of metadata " + strings.Join(keys, " or ")
	}
	return "Search for a job id (42), a key as group/key (reports.export/acme), a group's keys (reports.export/), a key without its group" +
		value + " (acme), a tag (vip) or metadata as key=value (tenant=acme)."
}

func (s *server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	switch {
	case q == "":
		s.render(w, r, http.StatusOK, "search", view{Title: "Search", Data: searchData{Hint: s.searchHelp()}})
		return
	case strings.Contains(q, "=") && !strings.Contains(q, "/"):
		// tenant=acme: the jobs carrying that metadata.
		http.Redirect(w, r, s.opts.Path+jobsURL("meta", q), http.StatusSeeOther)
		return
	case strings.HasSuffix(q, "/"):
		s.searchKeys(w, r, searchData{Query: q, GroupName: strings.TrimSuffix(q, "/")}, bq.KeySearch{Prefix: q, Max: searchShown})
		return
	case strings.HasPrefix(q, "/"):
		// "/acme": the keys that end with it, in any group.
		s.searchKeys(w, r, searchData{Query: strings.TrimPrefix(q, "/")}, bq.KeySearch{Suffix: q, Max: searchShown})
		return
	case strings.Contains(q, "/"):
		// A full key: its page says whether it is in use.
		http.Redirect(w, r, s.opts.Path+keyURL(q), http.StatusSeeOther)
		return
	}
	d := searchData{Query: q, GroupName: q}
	if id, err := strconv.ParseInt(q, 10, 64); err == nil && id > 0 {
		job, err := s.client.Job(r.Context(), id)
		switch {
		case err == nil:
			d.Job = job
		case !errors.Is(err, bq.ErrJobNotFound):
			s.fail(w, r, err)
			return
		}
	}
	var err error
	if d.Suffix, d.SuffixMore, err = s.client.SearchKeys(r.Context(), bq.KeySearch{Suffix: "/" + q, Max: searchShown}); err != nil {
		s.fail(w, r, err)
		return
	}
	if d.Group, d.GroupMore, err = s.client.SearchKeys(r.Context(), bq.KeySearch{Prefix: q + "/", Max: searchShown}); err != nil {
		s.fail(w, r, err)
		return
	}
	// The word as a metadata value: one page of jobs per key searched
	// (Options.SearchMetadata, at most MaxSearchMetadata of them), exact
	// matches only. A word no metadata could hold is no error.
	for _, key := range s.opts.SearchMetadata {
		page, err := s.client.ListJobs(r.Context(), bq.JobFilter{Metadata: map[string]string{key: q}, Limit: searchShown})
		switch {
		case err == nil && len(page.Jobs) > 0:
			m := metaFound{Key: key, Jobs: page.Jobs, More: page.Next != ""}
			if !strings.Contains(q, ",") {
				m.List = jobsURL("meta", key+"="+q)
			}
			d.Meta = append(d.Meta, m)
		case err != nil && !errors.Is(err, bq.ErrInvalidFilter):
			s.fail(w, r, err)
			return
		}
	}
	// A word that could be a tag lists the jobs carrying it; one that
	// could not (a space, say) is no tag, and no error.
	page, err := s.client.ListJobs(r.Context(), bq.JobFilter{Tag: q, Limit: searchShown})
	switch {
	case err == nil:
		d.Tagged, d.TaggedMore = page.Jobs, page.Next != ""
	case !errors.Is(err, bq.ErrInvalidFilter):
		s.fail(w, r, err)
		return
	}
	found := len(d.Suffix) > 0 || len(d.Group) > 0 || len(d.Meta) > 0 || len(d.Tagged) > 0
	if d.Job != nil && !found {
		http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d", s.opts.Path, d.Job.ID), http.StatusSeeOther)
		return
	}
	if d.Job == nil && !found {
		d.Hint = s.nothingFound(q)
	}
	s.render(w, r, http.StatusOK, "search", view{Title: "Search: " + q, Data: d})
}

// nothingFound says what a plain word was looked up as, none of which
// matched, how keys are spelled and what else to type.
func (s *server) nothingFound(q string) string {
	var none []string
	if _, err := strconv.ParseInt(q, 10, 64); err == nil {
		none = append(none, "no job has id "+q)
	}
	none = append(none, "no key in use ends with /"+q, "no group "+q+" has keys in use", "no job is tagged "+q)
	if keys := s.opts.SearchMetadata; len(keys) > 0 {
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + q
		}
		none = append(none, "no job has "+strings.Join(pairs, " or "))
	}
	said := strings.Join(none[:len(none)-1], ", ") + ", and " + none[len(none)-1]
	return strings.ToUpper(said[:1]) + said[1:] + ". " + keyRule + " " + s.searchHelp()
}

// searchKeys shows the keys of a group (a query ending in "/") or those
// that end with a query starting with "/".
func (s *server) searchKeys(w http.ResponseWriter, r *http.Request, d searchData, ks bq.KeySearch) {
	found, more, err := s.client.SearchKeys(r.Context(), ks)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ks.Prefix != "" {
		d.Group, d.GroupMore = found, more
	} else {
		d.Suffix, d.SuffixMore = found, more
	}
	if len(found) == 0 {
		d.Hint = fmt.Sprintf("No key in use starts with %s%s. %s", ks.Prefix, ks.Suffix, keyRule)
		if ks.Suffix != "" {
			d.Hint = fmt.Sprintf("No key in use ends with %s. %s", ks.Suffix, keyRule)
		}
	}
	s.render(w, r, http.StatusOK, "search", view{Title: "Search: " + ks.Prefix + ks.Suffix, Data: d})
}
