package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/ui"
)

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestPages renders every page over HTTP on each database and checks the
// figures, the actions' protections and a retry through admission.
func TestPages(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, db)
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := srv.Client()
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			if _, body := get(t, c, srv.URL+"/"); strings.Contains(body, `id="policies"`) {
				t.Error("the overview shows a policies table with no policy stored")
			}
			if err := f.client.SyncPolicies(context.Background(), "ui", []bq.Policy{{Queue: "calls", MaxActivePerKey: 3, MaxStartsPerKey: 10, StartsPeriod: time.Second, FairShare: true, KeyWeight: 2,
				MaxWait: 2 * time.Minute, Adaptive: &bq.Adaptive{Min: 2}},
				{Queue: "plain", MaxActive: 5}, {Queue: "shared", FairShare: true}}); err != nil {
				t.Fatal(err)
			}

			for _, p := range []struct{ path, want string }{
				{"/", `<tr data-queue="exports">`},
				{"/", `<tr data-queue="calls"><td>calls</td><td>ui</td><td class="num">–</td><td class="num">3</td><td class="num">–</td><td>2m0s</td><td>10 per 1s</td><td>yes, weight 2</td><td>min 2</td>`},
				{"/", `<tr data-queue="plain"><td>plain</td><td>ui</td><td class="num">5</td><td class="num">–</td><td class="num">–</td><td>–</td><td>–</td>`},
				{"/", `<tr data-queue="shared"><td>shared</td><td>ui</td><td class="num">–</td><td class="num">–</td><td class="num">–</td><td>–</td><td>–</td><td>yes</td><td>–</td>`},
				{"/", `<td class="num blocked"><a href="/blocked">3</a></td>`},
				{"/", `<span class="n">0</span> waiting in the inbox</span>`},
				{"/blocked", `<td class="num saturated">1</td>`},
				{"/key?key=" + url.QueryEscape("ui.export/acme"), `<dd class="free">0</dd>`},
				{fmt.Sprintf("/jobs/%d", f.keyedFailed), `&#34;Tenant&#34;: &#34;acme&#34;`},
				{"/failed", fmt.Sprintf(`data-retry="%d"`, f.keyedFailed)},
				{"/processes", "worker-1"},
				{"/assets/live.js", "data-refresh"},
			} {
				code, body := get(t, c, srv.URL+p.path)
				if code != http.StatusOK || !strings.Contains(body, p.want) {
					t.Errorf("GET %s: %d, body lacks %q", p.path, code, p.want)
				}
			}
			if code, _ := get(t, c, srv.URL+"/jobs/999999"); code != http.StatusNotFound {
				t.Errorf("missing job: %d, want 404", code)
			}
			// A key no job could have is the same bad input as in the API.
			for _, key := range []string{"ui.export/" + strings.Repeat("x", bq.MaxKeyBytes), "ui.export/a\x00b", "ui.export/\xff"} {
				code, body := get(t, c, srv.URL+"/key?key="+url.QueryEscape(key))
				if code != http.StatusBadRequest || !strings.Contains(body, "bq.MaxKeyBytes") {
					t.Errorf("GET /key?key=%.20q...: %d, want 400 naming the key rule", key, code)
				}
			}

			_, page := get(t, c, srv.URL+"/failed")
			m := csrfField.FindStringSubmatch(page)
			if m == nil {
				t.Fatal("no CSRF field on the failed page")
			}
			retry := fmt.Sprintf("%s/jobs/%d/retry", srv.URL, f.keyedFailed)
			var cookies []*http.Cookie // of the last POST's answer
			post := func(form url.Values, header http.Header) int {
				req, _ := http.NewRequest(http.MethodPost, retry, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				for k, v := range header {
					req.Header[k] = v
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				cookies = resp.Cookies()
				return resp.StatusCode
			}
			if code := post(url.Values{"next": {"/failed"}}, nil); code != http.StatusForbidden {
				t.Errorf("retry without the CSRF token: %d, want 403", code)
			}
			if code := post(url.Values{"csrf": {m[1]}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != http.StatusForbidden {
				t.Errorf("cross-site retry: %d, want 403", code)
			}
			if st := f.state(t, f.keyedFailed); st != bq.StateFailed {
				t.Fatalf("a refused retry changed the job to %s", st)
			}
			if code := post(url.Values{"csrf": {m[1]}, "next": {"/failed"}}, http.Header{"Sec-Fetch-Site": {"same-origin"}}); code != http.StatusSeeOther {
				t.Fatalf("retry: %d, want 303", code)
			}
			if st := f.state(t, f.keyedFailed); st != bq.StateBlocked {
				t.Errorf("retried job of a saturated key is %s, want blocked", st)
			}
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/failed", nil)
			for _, ck := range cookies {
				req.AddCookie(ck)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "it is now blocked") {
				t.Error("the failed page does not say what became of the retried job")
			}
		})
	}
}

// TestToken: with a token every request needs it; ?token= once sets a
// cookie and redirects to the URL without it.
func TestToken(t *testing.T) {
	f := newFixture(t, databases[0])
	mux := http.NewServeMux()
	mux.Handle("/bq/", http.StripPrefix("/bq", ui.Handler(f.client, ui.Options{Token: "s3cret", Path: "/bq"})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	if code, _ := get(t, c, srv.URL+"/bq/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get(t, c, srv.URL+"/bq/?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/bq/failed", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("bearer token: %v %v, want 200", resp.Status, err)
	}
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	var final *url.URL
	c.CheckRedirect = func(r *http.Request, _ []*http.Request) error { final = r.URL; return nil }
	code, body := get(t, c, srv.URL+"/bq/blocked?token=s3cret")
	if code != http.StatusOK || final == nil || final.RawQuery != "" || final.Path != "/bq/blocked" {
		t.Fatalf("?token=: %d, redirected to %v; want 200 at /bq/blocked without the token", code, final)
	}
	if !strings.Contains(body, `href="/bq/key?key=ui.export%2Facme"`) {
		t.Errorf("links do not carry the mount path: %s", regexp.MustCompile(`href="[^"]*key[^"]*"`).FindString(body))
	}
	if code, _ := get(t, c, srv.URL+"/bq/processes"); code != http.StatusOK {
		t.Errorf("with the cookie: %d, want 200", code)
	}
}

// TestHostCheck: without a token only loopback names and Options.Hosts
// are answered (421 otherwise, against DNS rebinding); with a token
// every name is, unless Hosts is set.
func TestHostCheck(t *testing.T) {
	f := newFixture(t, databases[0])
	for _, c := range []struct {
		opts ui.Options
		host string
		want int
	}{
		{ui.Options{}, "127.0.0.1:8080", http.StatusOK},
		{ui.Options{}, "localhost:8080", http.StatusOK},
		{ui.Options{}, "LOCALHOST", http.StatusOK},
		{ui.Options{}, "[::1]:8080", http.StatusOK},
		{ui.Options{}, "127.0.0.2", http.StatusOK},
		{ui.Options{}, "rebind.test:8080", http.StatusMisdirectedRequest},
		{ui.Options{}, "localhost.:8080", http.StatusMisdirectedRequest},
		{ui.Options{}, "app.localhost:8080", http.StatusMisdirectedRequest},
		{ui.Options{}, "127.0.0.1.nip.io", http.StatusMisdirectedRequest},
		{ui.Options{}, "192.0.2.1:8080", http.StatusMisdirectedRequest},
		{ui.Options{Hosts: []string{"dash.example"}}, "Dash.Example:9999", http.StatusOK},
		{ui.Options{Hosts: []string{"dash.example:8443"}}, "dash.example:8443", http.StatusOK},
		{ui.Options{Hosts: []string{"dash.example:8443"}}, "dash.example:9999", http.StatusMisdirectedRequest},
		{ui.Options{Hosts: []string{"*"}}, "anything.example", http.StatusOK},
		{ui.Options{Token: "t"}, "anything.example", http.StatusUnauthorized},
		{ui.Options{Token: "t", Hosts: []string{"a.example"}}, "b.example", http.StatusMisdirectedRequest},
		{ui.Options{Token: "t", Hosts: []string{"a.example"}}, "a.example", http.StatusUnauthorized},
	} {
		srv := httptest.NewServer(ui.Handler(f.client, c.opts))
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/processes", nil)
		req.Host = c.host
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %q, Hosts %q, token %v: %d, want %d", c.host, c.opts.Hosts, c.opts.Token != "", resp.StatusCode, c.want)
		}
		if c.want == http.StatusMisdirectedRequest && !strings.Contains(string(body), "DNS-rebinding") {
			t.Errorf("Host %q refused without saying why: %s", c.host, body)
		}
	}
}

// bigJob stores a failed job whose args and error are 3 MiB each, as a
// job stored before bq.MaxArgsBytes could be: straight through the driver.
func bigJob(t *testing.T, f *fixture) int64 {
	t.Helper()
	ctx := context.Background()
	args := `{"Blob":"` + strings.Repeat("a", 3<<20) + `"}`
	j := &driver.NewJob{Kind: "ui.mail", Queue: "big", Args: []byte(args), MaxAttempts: 1, ScheduledAt: time.Now()}
	err := driver.InTx(ctx, driver.ClientEngine(f.client), func(ex driver.Executor) error {
		_, _, err := lifecycle.Admit(ctx, ex, []*driver.NewJob{j}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := f.claim(t, "big")
	err = driver.InTx(ctx, driver.ClientEngine(f.client), func(ex driver.Executor) error {
		_, err := lifecycle.Fail(ctx, ex, c, strings.Repeat("e", 3<<20), time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// TestCaps: a page shows at most 64 KiB of a job's args and error, with
// the whole value (up to 2 MiB) one download away; pages answer no
// cross-site fetch; form bodies are bounded.
func TestCaps(t *testing.T) {
	f := newFixture(t, databases[0])
	id := bigJob(t, f)
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()

	code, page := get(t, c, fmt.Sprintf("%s/jobs/%d", srv.URL, id))
	t.Logf("page of a job with 3 MiB args and a 3 MiB error: %d bytes", len(page))
	if code != http.StatusOK || len(page) > 200<<10 {
		t.Errorf("page of a job with 3 MiB args and error: %d, %d bytes; want 200 and under 200 KiB", code, len(page))
	}
	for _, want := range []string{"first 64 KiB of 3145739 bytes", "first 64 KiB of 3145728 bytes",
		fmt.Sprintf(`href="/jobs/%d/args"`, id), fmt.Sprintf(`href="/jobs/%d/error"`, id)} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	for _, what := range []string{"args", "error"} {
		resp, err := c.Get(fmt.Sprintf("%s/jobs/%d/%s", srv.URL, id, what))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) != 2<<20 || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") ||
			resp.Header.Get("X-Bq-Size") == "" {
			t.Errorf("raw %s: %d, %d bytes, Content-Disposition %q, X-Bq-Size %q; want 200, 2 MiB as an attachment with its full size",
				what, resp.StatusCode, len(body), resp.Header.Get("Content-Disposition"), resp.Header.Get("X-Bq-Size"))
		}
	}
	if code, body := get(t, c, fmt.Sprintf("%s/jobs/%d/args", srv.URL, f.mailFailed)); code != http.StatusOK || body != `{"To":"bounce@example.com"}` {
		t.Errorf("raw args of a small job: %d %q", code, body)
	}

	for _, h := range []struct {
		path   string
		header http.Header
		want   int
	}{
		{"/failed", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"no-cors"}, "Sec-Fetch-Dest": {"image"}}, http.StatusForbidden},
		{"/failed", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"cors"}, "Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"/failed", http.Header{"Sec-Fetch-Site": {"same-site"}, "Sec-Fetch-Mode": {"no-cors"}}, http.StatusForbidden},
		{"/failed", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"iframe"}}, http.StatusForbidden},
		{"/failed", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}}, http.StatusForbidden},
		{"/failed", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden},
		{"/failed", http.Header{"Origin": {"null"}}, http.StatusForbidden},
		// A link the user followed from another site (a chat, a wiki).
		{"/failed", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Dest": {"document"}, "Sec-Fetch-User": {"?1"}}, http.StatusOK},
		{"/failed", http.Header{"Sec-Fetch-Site": {"same-origin"}}, http.StatusOK},
		{"/failed", http.Header{"Sec-Fetch-Site": {"none"}}, http.StatusOK},
		{"/failed", http.Header{"Origin": {srv.URL}}, http.StatusOK},
		{"/assets/style.css", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Sec-Fetch-Mode": {"no-cors"}}, http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+h.path, nil)
		req.Header = h.header
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != h.want {
			t.Errorf("GET %s with %v: %d, want %d", h.path, h.header, resp.StatusCode, h.want)
		}
	}

	// A form body is read up to 16 KiB, multipart too.
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		body := "csrf=" + strings.Repeat("a", 1<<20)
		if strings.HasPrefix(ct, "multipart") {
			body = "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n" + strings.Repeat("a", 1<<20) + "\r\n--x--\r\n"
		}
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/jobs/%d/retry", srv.URL, f.mailFailed), strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST of a 1 MiB %s form: %d, want 413", ct, resp.StatusCode)
		}
	}
}

// TestHiddenCharacters: names holding control or bidi characters show
// them written out (\u202e), so an override cannot reverse what follows
// it and an escape cannot hide in a page.
func TestHiddenCharacters(t *testing.T) {
	f := newFixture(t, databases[0])
	const tenant = "acme\u202eexe.\u2066\x1b[2K\x07"
	var id int64
	for range 3 {
		res, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: tenant, Report: "r\u202e"})
		if err != nil {
			t.Fatal(err)
		}
		id = res.ID
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	for _, p := range []string{"/blocked", "/key?key=" + url.QueryEscape("ui.export/"+tenant), fmt.Sprintf("/jobs/%d", id)} {
		code, body := get(t, srv.Client(), srv.URL+p)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", p, code)
		}
		if i := strings.IndexAny(body, "\u202e\u2066\x1b\x07"); i >= 0 {
			t.Errorf("GET %s carries a raw control or bidi character: %q", p, body[max(0, i-30):min(len(body), i+30)])
		}
		if !strings.Contains(body, `acme\u202eexe.\u2066\u001b[2K\u0007`) {
			t.Errorf("GET %s does not show the key's hidden characters written out", p)
		}
	}

	// Look-alikes: a zero-width space, a line separator, a filler and a
	// tag character show written out; a key that spells an escape shows
	// its backslash doubled, so it cannot pass for the character.
	for _, c := range []struct{ tenant, shown string }{
		{"ac\u200bme", `ac\u200bme`},
		{"acme\u2028", `acme\u2028`},
		{"ac\u3164me", `ac\u3164me`},
		{"acme\U000e0041", `acme\U000e0041`},
		{`acme\u202e`, `acme\\u202e`},
	} {
		if _, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: c.tenant}); err != nil {
			t.Fatal(err)
		}
		p := "/key?key=" + url.QueryEscape("ui.export/"+c.tenant)
		code, body := get(t, srv.Client(), srv.URL+p)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", p, code)
		}
		if i := strings.IndexAny(body, "\u200b\u2028\u3164\U000e0041"); i >= 0 {
			t.Errorf("key %q: the page carries a raw hidden character: %q", c.tenant, body[max(0, i-30):min(len(body), i+30)])
		}
		if !strings.Contains(body, c.shown) {
			t.Errorf("key %q: the page does not show it as %s", c.tenant, c.shown)
		}
	}
}

// noRedirects is a client that stops at the first response.
func noRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// TestTokenEdges: ?token= never redirects off the dashboard; any token
// can log in through the cookie, which never carries the token itself and
// is Secure behind a TLS proxy when told so.
func TestTokenEdges(t *testing.T) {
	f := newFixture(t, databases[0])
	const token = `s3;cr"e\t ,x`
	for _, secure := range []bool{false, true} {
		srv := httptest.NewServer(ui.Handler(f.client, ui.Options{Token: token, SecureCookies: secure}))
		c := noRedirects(srv.Client())
		for _, p := range []string{"//evil.example/", "/\\evil.example/", "//evil.example/failed?x=1", "/%2F%2Fevil.example/"} {
			resp, err := c.Get(srv.URL + p + sep(p) + "token=" + url.QueryEscape(token))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			loc := resp.Header.Get("Location")
			if strings.Contains(loc, "evil.example") && (strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") || strings.Contains(loc, "://")) {
				t.Errorf("GET %s?token=: redirected off-site to %q", p, loc)
			}
		}
		resp, err := c.Get(srv.URL + "/blocked?token=" + url.QueryEscape(token))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cookies := resp.Cookies()
		if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
			t.Fatalf("?token=: %d with %d cookies, want 303 setting one", resp.StatusCode, len(cookies))
		}
		ck := cookies[0]
		if strings.Contains(ck.Value, "s3") || ck.Secure != secure || !ck.HttpOnly {
			t.Errorf("cookie %q: Secure %v HttpOnly %v; want no token in it, Secure %v, HttpOnly", ck.Value, ck.Secure, ck.HttpOnly, secure)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/processes", nil)
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
		if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("with the cookie of a token holding ; \" \\ and a space: %v %v, want 200", resp.Status, err)
		}
		srv.Close()
	}
}

func sep(p string) string {
	if strings.Contains(p, "?") {
		return "&"
	}
	return "?"
}

// TestNextRedirect: an action redirects only to a path of the dashboard.
func TestNextRedirect(t *testing.T) {
	for _, next := range []string{"//evil.example/x", "/\\evil.example/x", "/\t/evil.example/x", "/\n/evil.example/x",
		"/\r\n/evil.example", "https://evil.example/", "evil.example", "/x\x00", "\x00//evil.example"} {
		f := newFixture(t, databases[0])
		srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
		c := noRedirects(srv.Client())
		_, page := get(t, c, srv.URL+"/failed")
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no CSRF field")
		}
		resp, err := c.PostForm(fmt.Sprintf("%s/jobs/%d/discard", srv.URL, f.mailFailed), url.Values{"csrf": {m[1]}, "next": {next}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || loc != fmt.Sprintf("/jobs/%d", f.mailFailed) {
			t.Errorf("next=%q: %d to %q, want 303 to the job's page", next, resp.StatusCode, loc)
		}
		srv.Close()
	}
}

// TestNotice: what became of a job is told after the POST that did it,
// once; a crafted ?done= link tells nothing.
func TestNotice(t *testing.T) {
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	for _, q := range []string{"?done=retried&job=999999", fmt.Sprintf("?done=discarded&job=%d", f.keyedFailed)} {
		if _, body := get(t, c, srv.URL+"/failed"+q); strings.Contains(body, `class="notice"`) {
			t.Errorf("/failed%s shows a notice", q)
		}
	}
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	body := retryFromFailedPage(t, c, srv.URL, f.keyedFailed)
	if want := fmt.Sprintf("Job %d retried: it is now blocked.", f.keyedFailed); !strings.Contains(string(body), want) {
		t.Errorf("after the retry the page does not say %q", want)
	}
	if _, body := get(t, c, srv.URL+"/failed"); strings.Contains(body, `class="notice"`) {
		t.Error("the notice shows again on the next page")
	}
}

// retryFromFailedPage posts the failed page's retry form for job id, as
// its button does, and returns the response's body.
func retryFromFailedPage(t *testing.T, c *http.Client, base string, id int64) []byte {
	t.Helper()
	_, page := get(t, c, base+"/failed")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF field")
	}
	resp, err := c.PostForm(fmt.Sprintf("%s/jobs/%d/retry", base, id), url.Values{"csrf": {m[1]}, "next": {"/failed"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return body
}

// TestNoticeTellsTheRetrysStateAndTheStateNow: when the retried job has
// moved on before the notice is read, the notice says both what the
// retry made of it and what it is now.
func TestNoticeTellsTheRetrysStateAndTheStateNow(t *testing.T) {
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	c.Jar, _ = cookiejar.New(nil)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	retryFromFailedPage(t, c, srv.URL, f.keyedFailed)
	info, err := f.client.Job(context.Background(), f.keyedFailed)
	if err != nil || info.State != bq.StateBlocked {
		t.Fatalf("retried job: %+v %v, want blocked", info, err)
	}
	// A raised limit promotes it before the notice is read.
	if err := f.client.SetKeyLimit(context.Background(), info.Key, 100); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, c, srv.URL+"/failed")
	if want := fmt.Sprintf("Job %d retried: it became blocked, and is now ready.", f.keyedFailed); !strings.Contains(body, want) {
		t.Errorf("the notice does not say %q", want)
	}
}

// TestAssetsAndKeys: /assets/ serves files, not listings; a key that is
// not text gets 400, not a database error.
func TestAssetsAndKeys(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			f := newFixture(t, db)
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := noRedirects(srv.Client())
			for _, p := range []string{"/assets/", "/assets", "/assets/nope.js", "/assets/%2e%2e"} {
				if code, body := get(t, c, srv.URL+p); code != http.StatusNotFound || strings.Contains(body, `href="live.js"`) {
					t.Errorf("GET %s: %d (lists live.js: %v), want 404", p, code, strings.Contains(body, `href="live.js"`))
				}
			}
			if code, _ := get(t, c, srv.URL+"/assets/style.css"); code != http.StatusOK {
				t.Errorf("GET /assets/style.css: %d", code)
			}
			for _, key := range []string{"ui.export/a\x00b", "ui.export/\xff\xfe"} {
				code, body := get(t, c, srv.URL+"/key?key="+url.QueryEscape(key))
				if code != http.StatusBadRequest || !strings.Contains(body, "UTF-8") {
					t.Errorf("key %q: %d, want 400 naming the problem", key, code)
				}
			}
		})
	}
}
