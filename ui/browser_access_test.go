package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// port is the port of a test server.
func port(srv *httptest.Server) string { return srv.URL[strings.LastIndex(srv.URL, ":")+1:] }

// TestBrowserToken: off loopback the dashboard needs a token. Chromium
// opens it as dash.test (resolved to 127.0.0.1, as a name on a LAN or
// behind a proxy would be): without a token the dashboard refuses the
// name (421); with one, a page without the token or with a wrong one is
// 401, ?token= once sets an HttpOnly cookie and redirects to the URL
// without the token, and the cookie then opens every page, for that
// browser only.
func TestBrowserToken(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, databases[0])
	const token = "s3cret token; with=odd \"chars\""
	open := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer open.Close()
	guarded := httptest.NewServer(ui.Handler(f.client, ui.Options{Token: token}))
	defer guarded.Close()
	rules := chromedp.Flag("host-resolver-rules", "MAP dash.test 127.0.0.1")
	ctx := browser(t, path, rules)
	at := func(srv *httptest.Server, path string) string { return "http://dash.test:" + port(srv) + path }
	status := func(u string) int {
		t.Helper()
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		return int(resp.Status)
	}
	body := func() string {
		t.Helper()
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
		if err != nil {
			t.Fatal(err)
		}
		return text
	}

	if got := status(at(open, "/")); got != http.StatusMisdirectedRequest {
		t.Errorf("a dashboard without a token answered dash.test with %d, want 421", got)
	}
	if !strings.Contains(body(), "give it a token") {
		t.Errorf("the 421 page does not say a token opens it: %q", body())
	}
	job := fmt.Sprintf("/jobs/%d", f.mailFailed)
	if got := status(at(guarded, job)); got != http.StatusUnauthorized {
		t.Errorf("the job page without the token: %d, want 401", got)
	}
	if strings.Contains(body(), "bounce@example.com") || !strings.Contains(body(), "needs its token") {
		t.Errorf("the 401 page shows %q: want no job data, and what to do", body())
	}
	if got := status(at(guarded, job+"?token=wrong")); got != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", got)
	}
	if got := status(at(guarded, job+"?token="+url.QueryEscape(token))); got != http.StatusOK {
		t.Errorf("the right token: %d, want 200 after the redirect", got)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || loc != at(guarded, job) {
		t.Errorf("after ?token= the browser is at %q (%v), want %q: the token must not stay in the URL", loc, err, at(guarded, job))
	}
	if cookies, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.cookie")); cookies != "" {
		t.Errorf("scripts can read cookies %q: the token cookie must be HttpOnly", cookies)
	}
	if !strings.Contains(body(), "bounce@example.com") {
		t.Error("the job page opened with the token does not show the job")
	}
	if got := status(at(guarded, "/processes")); got != http.StatusOK {
		t.Errorf("another page with the cookie: %d, want 200", got)
	}

	other := browser(t, path, rules) // another browser: no cookie
	resp, err := chromedp.Run(other, chromedp.NavigateResponse(at(guarded, job)))
	if err != nil || resp.Status != http.StatusUnauthorized {
		t.Errorf("another browser without the token: %v %v, want 401", resp, err)
	}
}

// forgedPost is another site's page that posts a form to the dashboard
// (%[1]s the action URL, %[2]s a CSRF token it somehow has).
const forgedPost = `<!doctype html><html><body>
<form method="post" action="%[1]s"><input name="csrf" value="%[2]s"><input name="next" value="/failed"></form>
<script>document.forms[0].submit();</script></body></html>`

// TestBrowserActionsArePosts: retry and discard change jobs only through
// a POST of the dashboard's own form. Following a link to an action (a
// GET) is 405, a same-origin POST without the form's token or with a
// wrong one is 403, another site's form is 403 even with the right
// token; the job stays failed through all of it, and the page's own
// button then works.
func TestBrowserActionsArePosts(t *testing.T) {
	path := chromium(t)
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	ctx := browser(t, path, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	discard := fmt.Sprintf("%s/jobs/%d/discard", srv.URL, f.mailFailed)

	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(discard))
	if err != nil || resp.Status != http.StatusMethodNotAllowed {
		t.Errorf("a GET of the discard action: %v %v, want 405", resp, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse(srv.URL+"/failed")); err != nil {
		t.Fatal(err)
	}
	csrf, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('input[name="csrf"]').value`))
	if err != nil || csrf == "" {
		t.Fatalf("read the form's CSRF token: %q %v", csrf, err)
	}
	for _, c := range []struct{ what, token string }{{"no token", ""}, {"a wrong token", "not-" + csrf}} {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(
			`fetch(%q, {method: "POST", body: new URLSearchParams({csrf: %q, next: "/failed"})}).then(r => r.status)`,
			discard, c.token), chromedp.EvalAwaitPromise))
		if err != nil || got != http.StatusForbidden {
			t.Errorf("a same-origin POST with %s: %d %v, want 403", c.what, got, err)
		}
	}

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, forgedPost, discard, csrf)
	}))
	defer evil.Close()
	if _, err := chromedp.Run(ctx, chromedp.NavigateResponse("http://evil.test:"+port(evil)+"/")); err != nil {
		t.Fatal(err)
	}
	refused, err := chromedp.Run(ctx, chromedp.Poll[bool](`location.href.endsWith("/discard") && document.body.innerText.includes("cross-origin request refused")`))
	if err != nil || !refused {
		t.Errorf("another site's form with the right token was not refused: %v", err)
	}
	if st := f.state(t, f.mailFailed); st != bq.StateFailed {
		t.Fatalf("the job is %s after the refused requests, want failed", st)
	}

	b := &session{t: t, ctx: ctx, root: srv.URL}
	b.open("/failed", "#failed")
	b.run("discard with the page's own button", chromedp.Click(chromedp.CSS(fmt.Sprintf(`button[data-discard="%d"]`, f.mailFailed))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.wantText(".notice", fmt.Sprintf("Job %d discarded: it is now discarded.", f.mailFailed))
	if st := f.state(t, f.mailFailed); st != bq.StateDiscarded {
		t.Errorf("the job is %s after the page's own discard, want discarded", st)
	}
}
