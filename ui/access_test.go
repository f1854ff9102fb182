package ui_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/ui"
)

// rawPost opens a connection and sends a POST's headers announcing a
// body of n bytes, and the first byte of it: a client trickling its form.
func rawPost(t *testing.T, addr, path string, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\nc", path, addr, n)
	return c
}

// TestSlowFormsHoldNoSlot: forms whose bodies trickle in do not hold the
// MaxInFlight slots every page needs (the body is read before a slot is
// taken), and a body slower than FormTimeout is answered 408.
func TestSlowFormsHoldNoSlot(t *testing.T) {
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{MaxInFlight: 2, FormTimeout: 1500 * time.Millisecond}))
	t.Cleanup(srv.Close) // after the slow connections' cleanups close them
	addr := strings.TrimPrefix(srv.URL, "http://")
	var slow []net.Conn
	for range 6 {
		slow = append(slow, rawPost(t, addr, fmt.Sprintf("/jobs/%d/retry", f.mailFailed), 100))
	}
	time.Sleep(200 * time.Millisecond) // let the server take them all in
	for i := range 3 {
		if code, _ := get(t, srv.Client(), srv.URL+"/"); code != http.StatusOK {
			t.Fatalf("GET / %d while 6 forms trickle in: %d, want 200", i, code)
		}
	}
	// The trickling ones are cut off after FormTimeout.
	for i, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("slow form %d: %v, want a 408 answer", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("slow form %d: %d, want 408", i, resp.StatusCode)
		}
	}
}

// TestSessions: the session cookie is a MAC of its issue time under a
// secret of the process: it stops working after SessionMaxAge and on
// another instance sharing the token, carries Max-Age, and is a __Host-
// cookie when Secure at the root (__Secure- under a path).
func TestSessions(t *testing.T) {
	f := newFixture(t, databases[0])
	const token = "a-token-of-24-characters"
	opts := ui.Options{Token: token, SessionMaxAge: 2 * time.Second}
	a := httptest.NewServer(ui.Handler(f.client, opts))
	defer a.Close()
	b := httptest.NewServer(ui.Handler(f.client, opts))
	defer b.Close()
	login := func(srv *httptest.Server) *http.Cookie {
		resp, err := noRedirects(srv.Client()).Get(srv.URL + "/failed?token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(resp.Cookies()) != 1 {
			t.Fatalf("log in: %d cookies", len(resp.Cookies()))
		}
		return resp.Cookies()[0]
	}
	withCookie := func(srv *httptest.Server, ck *http.Cookie) int {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/failed", nil)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	ck := login(a)
	if ck.MaxAge != 2 || ck.Name != "bq_ui_token" {
		t.Errorf("cookie %s Max-Age %d, want bq_ui_token with Max-Age 2", ck.Name, ck.MaxAge)
	}
	if code := withCookie(a, ck); code != http.StatusOK {
		t.Errorf("the session on its own instance: %d, want 200", code)
	}
	if code := withCookie(b, ck); code != http.StatusUnauthorized {
		t.Errorf("instance A's session on instance B (same token): %d, want 401", code)
	}
	time.Sleep(2100 * time.Millisecond)
	if code := withCookie(a, ck); code != http.StatusUnauthorized {
		t.Errorf("the session after SessionMaxAge: %d, want 401", code)
	}

	for _, c := range []struct{ path, name string }{{"", "__Host-bq_ui_token"}, {"/bq", "__Secure-bq_ui_token"}} {
		h := ui.Handler(f.client, ui.Options{Token: token, SecureCookies: true, Path: c.path})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/failed?token="+token, nil))
		cookies := rec.Result().Cookies()
		if len(cookies) != 1 || cookies[0].Name != c.name || !cookies[0].Secure || cookies[0].Path != c.path+"/" {
			t.Errorf("Secure under %q: cookies %v, want one %s, Secure, path %s/", c.path, cookies, c.name, c.path)
		}
	}
}

// TestGuessesSlowDown: after 5 wrong tokens from one address, the next
// try waits (429 with Retry-After, the token not even compared), the
// wait doubling with each miss; the right token then works again. A
// request without the token is answered 401 and its connection closed.
func TestGuessesSlowDown(t *testing.T) {
	f := newFixture(t, databases[0])
	const token = "a-token-of-24-characters"
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{Token: token}))
	defer srv.Close()
	try := func(tok string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/failed", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		if resp := try(fmt.Sprintf("guess-%d", i)); resp.StatusCode != http.StatusUnauthorized || !resp.Close {
			t.Fatalf("wrong token %d: %d (close %v), want 401 closing the connection", i+1, resp.StatusCode, resp.Close)
		}
	}
	resp := try(token)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the right token just after 5 wrong: %d Retry-After %q, want 429 and 1 s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// ?token= is a guess too.
	if resp, err := noRedirects(srv.Client()).Get(srv.URL + "/?token=" + url.QueryEscape(token)); err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("?token= while waiting: %v %v, want 429", resp.Status, err)
	}
	time.Sleep(1100 * time.Millisecond)
	if resp := try("guess-6"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token after the wait: %d, want 401", resp.StatusCode)
	}
	if resp := try(token); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("after a 6th miss: %d Retry-After %q, want 429 and 2 s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	time.Sleep(2100 * time.Millisecond)
	if resp := try(token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right token after the wait: %d, want 200", resp.StatusCode)
	}
	// The count is cleared: 5 more misses are free again.
	for i := range 5 {
		if resp := try(fmt.Sprintf("again-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d after a right one: %d, want 401", i+1, resp.StatusCode)
		}
	}
}

// TestErrorPageHidesDatabaseErrors: a failure the database reports shows
// as a plain message with a reference, never the database's own text
// (which quotes the statement near the fault); the log has it.
func TestErrorPageHidesDatabaseErrors(t *testing.T) {
	f := newFixture(t, databases[0])
	var logged strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(p)
	}), nil))
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{Logger: logger}))
	defer srv.Close()
	db := f.client.Driver().(*sqlite.Driver).DB()
	if _, err := db.Exec("ALTER TABLE bq_jobs RENAME TO bq_jobs_gone"); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv.Client(), srv.URL+fmt.Sprintf("/jobs/%d", f.mailFailed))
	if code != http.StatusInternalServerError {
		t.Errorf("GET a job without its table: %d, want 500", code)
	}
	if strings.Contains(body, "bq_jobs") || strings.Contains(body, "no such table") || !strings.Contains(body, "ref=") {
		t.Errorf("the error page shows the database's error, or no reference:\n%s", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "bq_jobs") || !strings.Contains(logged.String(), "ref=") {
		t.Errorf("the log lacks the error or its reference:\n%s", logged.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
