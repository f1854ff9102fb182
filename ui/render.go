package ui

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/humanize"

	"github.com/bqueue/bq"
)

// pages holds one template per page, each with the shared layout.
type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	"ago":       ago,
	"age":       age,
	"firstLine": firstLine,
	"keyURL":    keyURL,
	"rateURL":   rateURL,
	"rateText":  rateText,
	"labels":    labels,
	"jobsURL":   jobsURL,
	"join":      strings.Join,
	"stamp":     humanize.Time,
	"inc":       func(i int) int { return i + 1 },
	"sub":       func(a, b int) int { return a - b },
	// withBase hands a template both the mount path and its data.
	"withBase": func(base string, data any) map[string]any { return map[string]any{"Base": base, "Data": data} },
	// withCSRF hands a form's template the mount path, the form token and its data.
	"withCSRF": func(base, csrf string, data any) map[string]any {
		return map[string]any{"Base": base, "CSRF": csrf, "Data": data}
	},
	"cancellable": cancellable,
	// actionData is what the retry, discard and cancel forms need.
	"actionData": func(base, csrf string, id int64, next string) map[string]any {
		return map[string]any{"Base": base, "CSRF": csrf, "ID": id, "Next": next}
	},
}

func mustParse() *pages {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range []string{"overview", "blocked", "key", "job", "failed", "processes", "error", "history", "search", "jobs", "periodic", "rates", "rate", "verify", "workflow"} {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/chart.html",
			"templates/"+name+".html"))
		p.byName[name] = t
	}
	return p
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string // the nav entry to highlight
	Base    string // the mount path, prefixed to every link
	CSRF    string
	Refresh int // seconds between live refreshes; 0: none
	Now     time.Time
	Notice  string
	Data    any
}

// render writes page name; a failure to render is logged, not shown.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.Base, v.CSRF, v.Now = s.opts.Path, s.csrf, time.Now()
	var buf bytes.Buffer
	if err := s.pages.byName[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		s.opts.Logger.Error("bq ui: render page", "page", name, "path", r.URL.Path, "error", err)
		http.Error(w, "the page could not be rendered; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	// Names come from applications and their tenants: a bidi override
	// would reverse what follows it, a control character hide in a page.
	// Written out (\u202e), they show; the templates hold none.
	_, _ = io.WriteString(w, humanize.Visible(buf.String()))
}

// fail shows an error page: 404 for a missing job, 400 for bad input
// (bq.ErrInvalidArgument), 500 otherwise.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, shown := http.StatusInternalServerError, ""
	switch {
	case errors.Is(err, bq.ErrJobNotFound):
		status, shown = http.StatusNotFound, err.Error()
	case errors.Is(err, bq.ErrInvalidArgument), errors.Is(err, bq.ErrInvalidFilter):
		status, shown = http.StatusBadRequest, err.Error() // a key no job could have, say: bq's own words
	default:
		// A database's error quotes the statement near the fault: a gift
		// to anyone probing for an injection. The page says only where to
		// look; the log has the error.
		ref := rand.Text()[:8]
		s.opts.Logger.Error("bq ui: request failed", "path", r.URL.Path, "ref", ref, "error", err)
		shown = "The request failed. The server's log has the error, under ref=" + ref + "."
	}
	s.render(w, r, status, "error", view{Title: http.StatusText(status), Data: shown})
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Data: "No page at " + r.URL.Path + "."})
}

// renderCap bounds what a page shows of a job's args or error; the whole
// value is a download away (rawCap).
const renderCap = 64 << 10

// rawCap bounds a download of a job's args or error: twice MaxArgsBytes,
// so that any args bq accepts come whole, even as PostgreSQL's jsonb
// spells them back (with a space after each ':' and ',').
const rawCap = 2 * bq.MaxArgsBytes

// showArgs indents a job's args for its page, at most renderCap bytes of
// them; args that are not JSON, or too long to indent, show as they are.
func showArgs(raw []byte) (string, bool) {
	if len(raw) > renderCap {
		return humanize.Clip(string(raw), renderCap)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil || buf.Len() > renderCap {
		return string(raw), false
	}
	return buf.String(), false
}

func ago(t time.Time) string { return humanize.Ago(t, time.Now()) }

func age(d time.Duration) string { return humanize.Age(d) }

func firstLine(s string) string {
	s, _, cut := strings.Cut(s, "\n")
	if s, long := humanize.Clip(s, 160); long {
		return s + "…"
	}
	if cut {
		return s + " …"
	}
	return s
}
