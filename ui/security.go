package ui

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// secure wraps every request: security headers, the Host check, the
// access token when one is set, and cross-origin protection for POSTs.
func (s *server) secure(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	guarded := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !s.hostAllowed(r) {
			s.refuseHost(w, r)
			return
		}
		if crossSiteGET(r) && !strings.HasPrefix(r.URL.Path, "/assets/") {
			http.Error(w, "cross-site request refused: the dashboard serves its pages to itself and to links you follow; open it directly", http.StatusForbidden)
			return
		}
		if s.opts.Token != "" && !s.authorized(w, r) {
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		if r.Method == http.MethodPost && !s.readForm(w, r) {
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// readForm reads a POST's form, within FormTimeout, before the request
// takes one of the MaxInFlight slots: a client trickling its body holds
// its own connection only, never a slot every page needs.
func (s *server) readForm(w http.ResponseWriter, r *http.Request) bool {
	rc := http.NewResponseController(w)
	// A ResponseWriter that cannot set deadlines (a test recorder, a
	// wrapper of the mounting server's) still gets the size bound.
	deadline := rc.SetReadDeadline(time.Now().Add(s.opts.FormTimeout)) == nil
	if !parseForm(w, r) {
		// The deadline stays: the server drains what is left of the
		// body only until it.
		return false
	}
	if deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return true
}

// maxFormBytes bounds a request's body: the forms carry two short fields.
const maxFormBytes = 16 << 10

// crossSiteGET reports a GET (or HEAD) that another origin's page made:
// a fetch, an image, a frame. Any page the user visits could fire them,
// each costing a render. A top-level navigation the user made by hand (a
// link from a chat or a wiki) stays allowed: its page goes to the user,
// not to the other site. POSTs are CrossOriginProtection's.
func crossSiteGET(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false
	case "":
		// A browser without Fetch Metadata: only Origin can tell.
		origin := r.Header.Get("Origin")
		if origin == "" {
			return false
		}
		u, err := url.Parse(origin)
		return err != nil || !strings.EqualFold(u.Host, r.Host)
	}
	h := r.Header
	return h.Get("Sec-Fetch-Mode") != "navigate" || h.Get("Sec-Fetch-Dest") != "document" || h.Get("Sec-Fetch-User") != "?1"
}

// parseForm reads a POSTed form within maxFormBytes, answering 413 or
// 400 when it cannot.
func parseForm(w http.ResponseWriter, r *http.Request) bool {
	// ParseMultipartForm drops ParseForm's error on a form that is not
	// multipart: call both.
	err := r.ParseForm()
	if err == nil {
		if err = r.ParseMultipartForm(maxFormBytes); errors.Is(err, http.ErrNotMultipart) {
			err = nil
		}
	}
	if err == nil {
		return true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		http.Error(w, "the form is too large: it carries two short fields", http.StatusRequestEntityTooLarge)
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.Header().Set("Connection", "close")
		http.Error(w, "the form's body came too slowly", http.StatusRequestTimeout)
		return false
	}
	http.Error(w, "the form could not be read: "+err.Error(), http.StatusBadRequest)
	return false
}

// csrfOK checks the token a form carries against this handler's secret.
func (s *server) csrfOK(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) == 1
}

// formOK parses an action's form and checks its security token, answering
// the request itself when either fails.
func (s *server) formOK(w http.ResponseWriter, r *http.Request) bool {
	if !parseForm(w, r) {
		return false
	}
	if !s.csrfOK(r) {
		http.Error(w, "the form's security token is missing or stale: reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}
