package ui

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

const tokenCookie = "bq_ui_token"

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
		if s.opts.Token != "" && !s.authorized(w, r) {
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// authorized checks the token: a bearer header, the cookie, or ?token=
// once, which sets the cookie and redirects to the URL without it so the
// token does not linger in history or logs. It answers 401 otherwise.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenMatches(auth) {
		return true
	}
	if c, err := r.Cookie(tokenCookie); err == nil && s.tokenMatches(c.Value) {
		return true
	}
	if q := r.URL.Query(); q.Has("token") && r.Method == http.MethodGet && s.tokenMatches(q.Get("token")) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.opts.Token, Path: s.opts.Path + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		q.Del("token")
		u := url.URL{Path: s.opts.Path + r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="bq"`)
	http.Error(w, "unauthorized: this dashboard needs its token (open it once with ?token=..., or send Authorization: Bearer ...)", http.StatusUnauthorized)
	return false
}

func (s *server) tokenMatches(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// csrfOK checks the token a form carries against this handler's secret.
func (s *server) csrfOK(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) == 1
}
