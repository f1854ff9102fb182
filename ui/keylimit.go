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
		s.badKeyForm(w, r, badLimit, fmt.Sprintf("Limit %q: write a whole number of jobs at once, 1 to %d.", text, math.MaxInt32))
		return
	}
	s.changeKey(w, r, key, badLimit, limitNotice+fmt.Sprintf("set:%d", limit), func() error {
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
	s.changeKey(w, r, key, badLimit, limitNotice+"cleared", func() error { return s.client.ClearKeyLimit(r.Context(), key) })
}

// badLimit titles the 400 page of a limit form's bad input.
const badLimit = "Bad limit"

// changeKey runs an action of a key page's form (its limit, its weight),
// then redirects (303) to the key's page, which tells what was done:
// notice, signed into a cookie. Bad input, the action's
// ErrInvalidArgument included, is a 400 page titled bad.
func (s *server) changeKey(w http.ResponseWriter, r *http.Request, key, bad, notice string, action func() error) {
	if key == "" {
		s.badKeyForm(w, r, bad, "The form names no key: open the key's page (from the Blocked page or the search) and use its form.")
		return
	}
	if err := action(); err != nil {
		if errors.Is(err, bq.ErrInvalidArgument) {
			s.badKeyForm(w, r, bad, err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	// The notice holds no key (any bytes; the page names it): only what
	// was done, letters, digits and colons.
	s.setCookie(w, r, noticeCookie, notice+"."+s.sign(notice), 60)
	http.Redirect(w, r, s.opts.Path+keyURL(key), http.StatusSeeOther)
}

func (s *server) badKeyForm(w http.ResponseWriter, r *http.Request, title, problem string) {
	s.render(w, r, http.StatusBadRequest, "error", view{Title: title, Data: problem})
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
