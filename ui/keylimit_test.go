package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// TestKeyLimitForm: a key's page has a form that overrides the key's
// limit and one that clears the override, with the rate form's
// protections: the CSRF token, same-origin POSTs only, 405 for other
// methods. Bad input is 400 with the reason and changes nothing; a set
// readies the blocked jobs a raised limit frees, and the key's page then
// tells what was done (a signed notice) and shows the new limit.
func TestKeyLimitForm(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			const key = "ui.export/acme" // limit 2: 2 running, 3 blocked
			f, srv, c, keyPage := keyForms(t, db, key)
			state := func() *bq.KeyState {
				t.Helper()
				k, err := f.client.KeyState(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return k
			}

			code, body := get(t, c, srv.URL+keyPage)
			for _, want := range []string{`action="/key/limit/set"`, `action="/key/limit/clear"`,
				`<input type="hidden" name="key" value="ui.export/acme">`, `name="limit"`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET %s: %d, body lacks %q", keyPage, code, want)
				}
			}
			m := csrfField.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no CSRF field on the key page:\n%s", body)
			}

			post := func(action string, form url.Values, header http.Header) (int, string) {
				t.Helper()
				return postForm(t, c, srv.URL+"/key/limit/"+action, form, header)
			}
			wantFormsGuarded(t, c, srv.URL, url.Values{"key": {key}, "limit": {"5"}}, m[1], "/key/limit/set", "/key/limit/clear")
			for _, bad := range []struct {
				form url.Values
				want string
			}{
				{url.Values{"key": {key}, "limit": {"five"}}, `Limit &#34;five&#34;: write a whole number of jobs at once, 1 to 2147483647`},
				{url.Values{"key": {key}, "limit": {""}}, `Limit &#34;&#34;: write a whole number`},
				{url.Values{"key": {key}, "limit": {"2.5"}}, `Limit &#34;2.5&#34;: write a whole number`},
				// Past what the databases store: bad input, never a failed request.
				{url.Values{"key": {key}, "limit": {"3000000000"}}, `Limit &#34;3000000000&#34;: write a whole number`},
				{url.Values{"key": {key}, "limit": {"0"}}, "the limit is 0: give a limit of 1 or more"},
				{url.Values{"key": {key}, "limit": {"-3"}}, "the limit is -3"},
				{url.Values{"limit": {"5"}}, "The form names no key"},
				{url.Values{"key": {"ui.export/a\x00b"}, "limit": {"5"}}, "bq.MaxKeyBytes"},
			} {
				bad.form.Set("csrf", m[1])
				if code, body := post("set", bad.form, nil); code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
					t.Errorf("set %q: %d, want 400 saying %q:\n%s", bad.form, code, bad.want, body)
				}
			}
			if code, body := post("clear", url.Values{"csrf": {m[1]}}, nil); code != http.StatusBadRequest || !strings.Contains(body, "The form names no key") {
				t.Errorf("a clear naming no key: %d, want 400 saying so:\n%s", code, body)
			}
			if k := state(); k.Limit != 2 || k.Blocked != 3 {
				t.Fatalf("after refused sets, the key has limit %d and %d blocked; want 2 and 3, untouched", k.Limit, k.Blocked)
			}

			code, body = post("set", url.Values{"csrf": {m[1]}, "key": {key}, "limit": {" 4 "}}, nil)
			if code != http.StatusOK || !strings.Contains(body, "Limit set to 4 jobs at once, for every job of the key, until the override is cleared.") ||
				!strings.Contains(body, `<dd class="limit">4</dd>`) {
				t.Errorf("after the set: %d, want the key page with the notice and limit 4:\n%s", code, body)
			}
			if k := state(); k.Limit != 4 || k.Blocked != 1 || k.Taken != 4 {
				t.Errorf("after the set: limit %d, %d held, %d blocked; want 4, 4 and 1 (two blocked jobs readied)", k.Limit, k.Taken, k.Blocked)
			}
			if _, body := get(t, c, srv.URL+keyPage); strings.Contains(body, "Limit set to") {
				t.Error("the notice shows again on the next visit: it must be told once")
			}

			code, body = post("clear", url.Values{"csrf": {m[1]}, "key": {key}}, nil)
			if code != http.StatusOK || !strings.Contains(body, "Limit override cleared") || !strings.Contains(body, `<dd class="limit">2</dd>`) {
				t.Errorf("after the clear: %d, want the key page saying the override is cleared, limit 2 again:\n%s", code, body)
			}
			if k := state(); k.Limit != 2 {
				t.Errorf("after the clear: limit %d, want the jobs' own 2", k.Limit)
			}

		})
	}
}

// keyForms serves the dashboard of a fresh fixture of db, for the tests
// of the forms on key's page: it returns the fixture, the server, a
// client that keeps cookies (the notices) and the key page's path.
func keyForms(t *testing.T, db database, key string) (*fixture, *httptest.Server, *http.Client, string) {
	t.Helper()
	f := newFixture(t, db)
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.Jar, _ = cookiejar.New(nil)
	return f, srv, c, "/key?key=" + url.QueryEscape(key)
}

// wantFormsGuarded checks the protections of the actions (paths under
// base) of a form: a POST of form without the CSRF token, or with it
// (csrf) from another site, is 403; a GET with form as its query is 405.
// The caller checks that nothing changed.
func wantFormsGuarded(t *testing.T, c *http.Client, base string, form url.Values, csrf string, actions ...string) {
	t.Helper()
	for _, action := range actions {
		if code, _ := postForm(t, c, base+action, form, nil); code != http.StatusForbidden {
			t.Errorf("POST %s without the form token: %d, want 403", action, code)
		}
		withToken := url.Values{"csrf": {csrf}}
		for k, v := range form {
			withToken[k] = v
		}
		if code, _ := postForm(t, c, base+action, withToken, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != http.StatusForbidden {
			t.Errorf("a cross-site POST %s: %d, want 403", action, code)
		}
		if code, _ := get(t, c, base+action+"?"+withToken.Encode()); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405", action, code)
		}
	}
}

// postRedirected POSTs form to target through c, following the
// redirect, and returns the status and path of the redirect ("303
// /key?key=…"), with the status and body of the page it led to.
func postRedirected(t *testing.T, c *http.Client, target string, form url.Values) (redirect string, code int, body string) {
	t.Helper()
	follow := *c
	follow.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		redirect = fmt.Sprint(req.Response.StatusCode, " ", req.URL.RequestURI())
		return nil
	}
	code, body = postForm(t, &follow, target, form, nil)
	return redirect, code, body
}

// postForm POSTs form to target through c, with header's fields, and returns
// the status and body of the answer (the page redirected to, if c follows
// redirects).
func postForm(t *testing.T, c *http.Client, target string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, target, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
