package ui

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bqueue/bq"
)

const (
	tokenCookie  = "bq_ui_token"
	noticeCookie = "bq_ui_notice"
)

// authorized checks the token: a bearer header, the session cookie, or
// ?token= once, which sets the cookie and redirects to the URL without it
// so the token does not linger in history or logs. It answers 401
// otherwise, and 429 to a client whose wrong tokens come too fast (see
// guard).
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	now := time.Now()
	if c, err := r.Cookie(s.cookieName(r, tokenCookie)); err == nil && s.sessionValid(c.Value, now) {
		return true
	}
	bearer, hasBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	q := r.URL.Query()
	viaQuery := q.Has("token") && r.Method == http.MethodGet
	if hasBearer || viaQuery {
		if wait := s.guard.wait(r, now); wait > 0 {
			refuseGuess(w, wait)
			return false
		}
	}
	if hasBearer {
		if s.tokenMatches(bearer) {
			s.guard.forget(r)
			return true
		}
		s.guard.failed(r, now)
	}
	if viaQuery {
		if !s.tokenMatches(q.Get("token")) {
			s.guard.failed(r, now)
		} else {
			s.guard.forget(r)
			s.setCookie(w, r, tokenCookie, s.newSession(now), int(s.opts.SessionMaxAge/time.Second))
			q.Del("token")
			// r.URL.Path "//evil.example/" must not become a Location that
			// leaves the dashboard.
			target := s.opts.Path + r.URL.Path
			if !localPath(target) {
				target = s.opts.Path + "/"
			}
			u := url.URL{Path: target, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return false
		}
	}
	h := w.Header()
	h.Set("WWW-Authenticate", `Bearer realm="bq"`)
	// A client without the token keeps no connection open.
	h.Set("Connection", "close")
	http.Error(w, "unauthorized: this dashboard needs its token (open it once with ?token=..., or send Authorization: Bearer ...)", http.StatusUnauthorized)
	return false
}

func refuseGuess(w http.ResponseWriter, wait time.Duration) {
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	h.Set("Connection", "close")
	http.Error(w, "too many wrong tokens from this address: wait and try again", http.StatusTooManyRequests)
}

func (s *server) tokenMatches(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// newSession is the session cookie's value: its issue time and a MAC of
// it under this handler's secret, random per process. The cookie never
// carries the token (so any token, one holding ; " \ or spaces, can log
// in, and the cookie is a bearer token for nothing else), stops working
// after SessionMaxAge, when the process restarts, and on any other
// instance sharing the token.
func (s *server) newSession(now time.Time) string {
	issued := strconv.FormatInt(now.Unix(), 10)
	return issued + "." + s.sign("session."+issued)
}

// sessionValid checks a session cookie's MAC and age.
func (s *server) sessionValid(v string, now time.Time) bool {
	issued, mac, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	if !hmac.Equal([]byte(mac), []byte(s.sign("session."+issued))) {
		return false
	}
	sec, err := strconv.ParseInt(issued, 10, 64)
	if err != nil {
		return false
	}
	age := now.Sub(time.Unix(sec, 0))
	return age < s.opts.SessionMaxAge && age > -time.Minute
}

// cookieName prefixes a cookie's name as browsers enforce it: __Host- (Secure,
// path /, no domain: no other host or path can set or shadow it) when
// the dashboard is Secure at the root, __Secure- when Secure under a path.
func (s *server) cookieName(r *http.Request, name string) string {
	switch {
	case !s.secureCookies(r):
		return name
	case s.opts.Path == "":
		return "__Host-" + name
	}
	return "__Secure-" + name
}

func (s *server) secureCookies(r *http.Request) bool { return r.TLS != nil || s.opts.SecureCookies }

// setCookie sets one of the dashboard's cookies; maxAge as in
// http.Cookie (0: for the session, -1: delete).
func (s *server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(r, name), Value: value, Path: s.opts.Path + "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r)})
}

// localPath reports whether p is a path of this site that a browser
// cannot read as another host: one /, then not / or \, no \ anywhere
// (browsers read it as /), and no control character (browsers drop tabs
// and newlines, so "/\t/evil.example" would become "//evil.example").
func localPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, "\\") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			return false
		}
	}
	return true
}

// tell leaves the next page a notice of what an action did to job id and
// the state it left the job in, in a cookie signed with this handler's
// secret: a link cannot fake one.
func (s *server) tell(w http.ResponseWriter, r *http.Request, done string, id int64, state bq.JobState) {
	v := fmt.Sprintf("%s.%d.%s", done, id, state)
	s.setCookie(w, r, noticeCookie, v+"."+s.sign(v), 60)
}

// notice reads and clears the notice an action left, and says what
// became of the job since, in words of the server's own making.
func (s *server) notice(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(s.cookieName(r, noticeCookie))
	if err != nil {
		return ""
	}
	s.setCookie(w, r, noticeCookie, "", -1)
	i := strings.LastIndexByte(c.Value, '.')
	if i < 0 || !hmac.Equal([]byte(c.Value[i+1:]), []byte(s.sign(c.Value[:i]))) {
		return ""
	}
	if queue, ok := strings.CutPrefix(c.Value[:i], queueNotice); ok {
		return queueSaid(queue)
	}
	if done, ok := strings.CutPrefix(c.Value[:i], rateNotice); ok {
		return rateSaid(done)
	}
	if done, ok := strings.CutPrefix(c.Value[:i], limitNotice); ok {
		return limitSaid(done)
	}
	if done, ok := strings.CutPrefix(c.Value[:i], weightNotice); ok {
		return weightSaid(done)
	}
	if done, ok := strings.CutPrefix(c.Value[:i], keyPauseNotice); ok {
		return keyPauseSaid(done)
	}
	if done, ok := strings.CutPrefix(c.Value[:i], verifyNotice); ok {
		return verifySaid(done)
	}
	parts := strings.SplitN(c.Value[:i], ".", 3)
	if len(parts) != 3 {
		return ""
	}
	done, state := parts[0], bq.JobState(parts[2])
	id, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || (done != "retried" && done != "discarded" && done != "cancelled") {
		return ""
	}
	info, err := s.client.Job(r.Context(), id)
	switch {
	case done == "cancelled" && state == bq.StateRunning && err == nil:
		return cancelSaid(id, info.State)
	case err != nil:
		return fmt.Sprintf("Job %d %s: it became %s.", id, done, state)
	case info.State != state:
		// It moved on since (claimed, run, finished): say both.
		return fmt.Sprintf("Job %d %s: it became %s, and is now %s.", id, done, state, info.State)
	}
	return fmt.Sprintf("Job %d %s: it is now %s.", id, done, info.State)
}

func (s *server) sign(v string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}
