package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

// TestKeyWeightForm: a key's page shows its fair-share weight (none, or
// the stored one) with a form that sets it and, once set, one that clears
// it, with the limit form's protections: the CSRF token, same-origin
// POSTs only, 405 for other methods. Bad input is a 400 "Bad weight" page
// with the reason and changes nothing; a set or clear redirects (303) to
// the key's page, which tells once what was done (a signed notice).
func TestKeyWeightForm(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			const key = "ui.export/acme"
			f, srv, c, keyPage := keyForms(t, db, key)
			weights := func() []bq.KeyWeight {
				t.Helper()
				ws, err := f.client.KeyWeights(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return ws
			}

			code, body := get(t, c, srv.URL+keyPage)
			for _, want := range []string{`action="/key/weight/set"`, `name="weight" type="number" min="1" max="1000" required value=""`,
				`<strong class="weight">none</strong>: the queue policy's KeyWeight, else 1.`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET %s: %d, body lacks %q", keyPage, code, want)
				}
			}
			if strings.Contains(body, `id="weight-clear"`) {
				t.Errorf("GET %s: a Clear weight button on a key without a weight", keyPage)
			}
			m := csrfField.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no CSRF field on the key page:\n%s", body)
			}

			post := func(action string, form url.Values, header http.Header) (int, string) {
				t.Helper()
				return postForm(t, c, srv.URL+"/key/weight/"+action, form, header)
			}
			wantFormsGuarded(t, c, srv.URL, url.Values{"key": {key}, "weight": {"3"}}, m[1], "/key/weight/set", "/key/weight/clear")
			for _, bad := range []struct {
				form url.Values
				want string
			}{
				{url.Values{"key": {key}, "weight": {"x"}}, `Weight &#34;x&#34;: write a whole number, 1 to 1000.`},
				{url.Values{"key": {key}, "weight": {""}}, `Weight &#34;&#34;: write a whole number`},
				{url.Values{"key": {key}, "weight": {"2.5"}}, `Weight &#34;2.5&#34;: write a whole number`},
				{url.Values{"key": {key}, "weight": {"0"}}, "the weight is 0: give a weight of 1 to 1000"},
				{url.Values{"key": {key}, "weight": {"1001"}}, "the weight is 1001: give a weight of 1 to 1000"},
				{url.Values{"weight": {"3"}}, "The form names no key"},
				{url.Values{"key": {"acme"}, "weight": {"3"}}, "the key has no group"},
				{url.Values{"key": {"ui.export/a\x00b"}, "weight": {"3"}}, "bq.MaxKeyBytes"},
			} {
				bad.form.Set("csrf", m[1])
				code, body := post("set", bad.form, nil)
				if code != http.StatusBadRequest || !strings.Contains(body, "<h1>Bad weight</h1>") || !strings.Contains(body, bad.want) {
					t.Errorf("set %q: %d, want 400 Bad weight saying %q:\n%s", bad.form, code, bad.want, body)
				}
			}
			if code, body := post("clear", url.Values{"csrf": {m[1]}}, nil); code != http.StatusBadRequest || !strings.Contains(body, "The form names no key") {
				t.Errorf("a clear naming no key: %d, want 400 saying so:\n%s", code, body)
			}
			if ws := weights(); len(ws) != 0 {
				t.Fatalf("after refused and unguarded requests, the stored weights are %v; want none", ws)
			}

			redirect, code, body := postRedirected(t, c, srv.URL+"/key/weight/set", url.Values{"csrf": {m[1]}, "key": {key}, "weight": {" 3 "}})
			if want := fmt.Sprint(http.StatusSeeOther, " ", keyPage); redirect != want {
				t.Errorf("the set redirects %q, want %q", redirect, want)
			}
			if ws := weights(); len(ws) != 1 || ws[0].Key != key || ws[0].Weight != 3 {
				t.Errorf("after the set: stored weights %v, want %s at 3", ws, key)
			}
			if code != http.StatusOK || !strings.Contains(body, "Weight set to 3: from the next claim on") ||
				!strings.Contains(body, `<strong class="weight">3</strong>, set `) || !strings.Contains(body, `required value="3"`) ||
				!strings.Contains(body, `id="weight-clear"`) {
				t.Errorf("after the set: %d, want the key page with the notice, weight 3 and a Clear weight button:\n%s", code, body)
			}
			if _, body := get(t, c, srv.URL+keyPage); strings.Contains(body, "Weight set to") {
				t.Error("the notice shows again on the next visit: it must be told once")
			}

			code, body = post("clear", url.Values{"csrf": {m[1]}, "key": {key}}, nil)
			if code != http.StatusOK || !strings.Contains(body, "Weight cleared: from the next claim on") ||
				!strings.Contains(body, `<strong class="weight">none</strong>`) {
				t.Errorf("after the clear: %d, want the key page saying the weight is cleared, none again:\n%s", code, body)
			}
			if ws := weights(); len(ws) != 0 {
				t.Errorf("after the clear: stored weights %v, want none", ws)
			}

		})
	}
}
