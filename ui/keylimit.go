package ui

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/bqueue/bq"
)

// A key's limit override: the key's page has a form that sets it
// (client.SetKeyLimit) and one that clears it (client.ClearKeyLimit), as
// the rate key's page does for its rate.

// setLimit overrides a key's limit (the form of its page).
func (s *server) setLimit(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	text := strings.TrimSpace(r.PostFormValue("limit"))
	// The databases store a limit in 32 bits, and PostgreSQL and MySQL
	// fail a larger one as a database error: here it is bad input.
	limit, err := strconv.ParseInt(text, 10, 32)
	if err != nil {
		s.badLimitForm(w, r, fmt.Sprintf("Limit %q: write a whole number of jobs at once, 1 to %d.", text, math.MaxInt32))
		return
	}
	s.changeLimit(w, r, key, fmt.Sprintf("set:%d", limit), func() error {
		return s.client.SetKeyLimit(r.Context(), key, int(limit))
	})
}

// clearLimit removes a key's limit override; a key without one is left
// as it is.
func (s *server) clearLimit(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	s.changeLimit(w, r, key, "cleared", func() error { return s.client.ClearKeyLimit(r.Context(), key) })
}

// changeLimit runs a limit action, then redirects (303) to the key's
// page, which tells what was done.
func (s *server) changeLimit(w http.ResponseWriter, r *http.Request, key, done string, action func() error) {
	if key == "" {
		s.badLimitForm(w, r, "The form names no key: open the key's page (from the Blocked page or the search) and use its form.")
		return
	}
	if err := action(); err != nil {
		if errors.Is(err, bq.ErrInvalidArgument) {
			s.badLimitForm(w, r, err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	// The notice holds no key (any bytes; the page names it): only what
	// was done, letters, digits and a colon.
	v := limitNotice + done
	s.setCookie(w, r, noticeCookie, v+"."+s.sign(v), 60)
	http.Redirect(w, r, s.opts.Path+keyURL(key), http.StatusSeeOther)
}

func (s *server) badLimitForm(w http.ResponseWriter, r *http.Request, problem string) {
	s.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad limit", Data: problem})
}

// limitNotice starts the notice a limit action leaves: "l:" done.
const limitNotice = "l:"

// limitSaid is the notice of a limit action, from its signed cookie
// value after limitNotice.
func limitSaid(v string) string {
	if v == "cleared" {
		return "Limit override cleared: the key takes its jobs' own limit (or their queue policy's) again; " +
			"with none of its jobs live, from the next one enqueued."
	}
	if limit, ok := strings.CutPrefix(v, "set:"); ok {
		return fmt.Sprintf("Limit set to %s jobs at once, for every job of the key, until the override is cleared.", limit)
	}
	return ""
}
