package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq"
)

// Rate keys: the Rates page lists them, a rate key's page shows its
// state and line with a form that sets or clears its override.

// ratesPage is how many rate keys the Rates page lists at once.
const ratesPage = 100

// ratesData is a page of rate keys.
type ratesData struct {
	Rates []*bq.RateState
	// Next is the path of the next page; "" on the last.
	Next string
}

func (s *server) rates(w http.ResponseWriter, r *http.Request) {
	rates, err := s.client.ListRates(r.Context(), r.URL.Query().Get("after"), ratesPage)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := ratesData{Rates: rates}
	if len(rates) == ratesPage {
		d.Next = "/rates?" + url.Values{"after": {rates[len(rates)-1].Key}}.Encode()
	}
	s.render(w, r, http.StatusOK, "rates", view{Title: "Rate limits", Nav: "rates",
		Refresh: int(s.opts.Refresh.Seconds() + 0.5), Data: d})
}

func (s *server) rateKey(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		s.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad request", Data: "Name a rate key: /rate?key=group/key."})
		return
	}
	// A key that breaks the key rule is bad input (400), as in the API.
	st, err := s.client.RateState(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "rate", view{Title: "Rate key " + key, Nav: "rates", Notice: s.notice(w, r), Data: st})
}

// setRate overrides a rate key's rate (the form of its page).
func (s *server) setRate(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	limitText, periodText := strings.TrimSpace(r.PostFormValue("limit")), strings.TrimSpace(r.PostFormValue("period"))
	limit, err := strconv.Atoi(limitText)
	if err != nil {
		s.badRateForm(w, r, fmt.Sprintf("Limit %q: write a whole number of starts per period, 1 to %d.", limitText, bq.MaxRateLimit))
		return
	}
	period, err := time.ParseDuration(periodText)
	if err != nil || period <= 0 {
		s.badRateForm(w, r, fmt.Sprintf("Period %q: write a duration of 1ms or more, such as 1s, 250ms or 1m.", periodText))
		return
	}
	s.changeRate(w, r, key, fmt.Sprintf("set:%d:%s", limit, period), func() error {
		return s.client.SetKeyRate(r.Context(), key, limit, period)
	})
}

// clearRate removes a rate key's override.
func (s *server) clearRate(w http.ResponseWriter, r *http.Request) {
	if !s.formOK(w, r) {
		return
	}
	key := r.PostFormValue("key")
	s.changeRate(w, r, key, "cleared", func() error { return s.client.ClearKeyRate(r.Context(), key) })
}

// changeRate runs a rate action, then redirects (303) to the key's page,
// which tells what was done.
func (s *server) changeRate(w http.ResponseWriter, r *http.Request, key, done string, action func() error) {
	if key == "" {
		s.badRateForm(w, r, "The form names no rate key: open the key's page from the Rates page and use its form.")
		return
	}
	if err := action(); err != nil {
		if errors.Is(err, bq.ErrInvalidArgument) {
			s.badRateForm(w, r, err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	// The notice holds no key (any bytes; the page names it): only what
	// was done, letters, digits and a Go duration.
	v := rateNotice + done
	s.setCookie(w, r, noticeCookie, v+"."+s.sign(v), 60)
	http.Redirect(w, r, s.opts.Path+rateURL(key), http.StatusSeeOther)
}

func (s *server) badRateForm(w http.ResponseWriter, r *http.Request, problem string) {
	s.render(w, r, http.StatusBadRequest, "error", view{Title: "Bad rate", Data: problem})
}

// rateNotice starts the notice a rate action leaves: "r:" done.
const rateNotice = "r:"

// rateSaid is the notice of a rate action, from its signed cookie value
// after rateNotice.
func rateSaid(v string) string {
	if v == "cleared" {
		return "Rate override cleared: the key takes its jobs' own rate again."
	}
	if rest, ok := strings.CutPrefix(v, "set:"); ok {
		limit, period, _ := strings.Cut(rest, ":")
		return fmt.Sprintf("Rate set to %s starts per %s, for every job of the key, until the override is cleared.", limit, period)
	}
	return ""
}

// rateURL is a rate key's page.
func rateURL(key string) string { return "/rate?key=" + url.QueryEscape(key) }

// rateText is a rate for a person: "10/1s".
func rateText(r *bq.RateState) string {
	if !r.Exists || r.Limit == 0 {
		return "–"
	}
	return fmt.Sprintf("%d/%s", r.Limit, r.Period)
}
