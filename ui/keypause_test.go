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

// TestKeyPauseButton: a key's page has a Pause button, or a Resume button
// while the key is paused, with the limit form's protections: the CSRF
// token, same-origin POSTs only, 405 for other methods. A form naming no
// key or a bad key is a 400 "Bad key" page with the reason and pauses
// nothing; a pause or resume redirects (303) to the key's page, which
// tells once what was done. The overview lists the paused keys, each
// linked to its page with a Resume button, and nothing while none is.
func TestKeyPauseButton(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			const key = "ui.export/acme"
			f, srv, c, keyPage := keyForms(t, db, key)
			paused := func() []bq.PausedKey {
				t.Helper()
				ps, err := f.client.PausedKeys(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return ps
			}

			code, body := get(t, c, srv.URL+keyPage)
			for _, want := range []string{`action="/key/pause"`, `data-pause-key="ui.export/acme"`, "Not paused: its jobs are claimed as usual."} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET %s: %d, body lacks %q", keyPage, code, want)
				}
			}
			if _, overview := get(t, c, srv.URL+"/"); strings.Contains(overview, `id="paused-keys"`) {
				t.Error("the overview lists paused keys while none is paused")
			}
			m := csrfField.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no CSRF field on the key page:\n%s", body)
			}

			post := func(action string, form url.Values) (int, string) {
				t.Helper()
				return postForm(t, c, srv.URL+"/key/"+action, form, nil)
			}
			wantFormsGuarded(t, c, srv.URL, url.Values{"key": {key}}, m[1], "/key/pause", "/key/resume")
			for _, bad := range []struct {
				action string
				form   url.Values
				want   string
			}{
				{"pause", url.Values{}, "The form names no key"},
				{"resume", url.Values{}, "The form names no key"},
				{"pause", url.Values{"key": {"acme"}}, "the key has no group"},
				{"resume", url.Values{"key": {"acme"}}, "the key has no group"},
				{"pause", url.Values{"key": {"ui.export/a\x00b"}}, "bq.MaxKeyBytes"},
			} {
				bad.form.Set("csrf", m[1])
				code, body := post(bad.action, bad.form)
				if code != http.StatusBadRequest || !strings.Contains(body, "<h1>Bad key</h1>") || !strings.Contains(body, bad.want) {
					t.Errorf("%s %q: %d, want 400 Bad key saying %q:\n%s", bad.action, bad.form, code, bad.want, body)
				}
			}
			if ps := paused(); len(ps) != 0 {
				t.Fatalf("after refused and unguarded requests, the paused keys are %v; want none", ps)
			}

			redirect, code, body := postRedirected(t, c, srv.URL+"/key/pause", url.Values{"csrf": {m[1]}, "key": {key}})
			if want := fmt.Sprint(http.StatusSeeOther, " ", keyPage); redirect != want {
				t.Errorf("the pause redirects %q, want %q", redirect, want)
			}
			if ps := paused(); len(ps) != 1 || ps[0].Key != key {
				t.Errorf("after the pause: paused keys %v, want %s", ps, key)
			}
			if code != http.StatusOK || !strings.Contains(body, "Key paused: no process claims its jobs until it is resumed") ||
				!strings.Contains(body, `<span class="state paused">paused</span> since `) || !strings.Contains(body, `action="/key/resume"`) ||
				!strings.Contains(body, `data-resume-key="ui.export/acme"`) {
				t.Errorf("after the pause: %d, want the key page with the notice, the paused badge and a Resume button:\n%s", code, body)
			}
			if _, body := get(t, c, srv.URL+keyPage); strings.Contains(body, "Key paused:") {
				t.Error("the notice shows again on the next visit: it must be told once")
			}
			// Pausing a paused key changes nothing.
			if code, _ := post("pause", url.Values{"csrf": {m[1]}, "key": {key}}); code != http.StatusOK || len(paused()) != 1 {
				t.Errorf("a second pause: %d, paused keys %v; want the one", code, paused())
			}

			code, overview := get(t, c, srv.URL+"/")
			for _, want := range []string{`<table id="paused-keys">`, `<td><a href="/key?key=ui.export%2Facme">ui.export/acme</a></td>`,
				`action="/key/resume"`, `data-resume-key="ui.export/acme"`} {
				if code != http.StatusOK || !strings.Contains(overview, want) {
					t.Errorf("the overview with %s paused: %d, lacks %q", key, code, want)
				}
			}

			redirect, code, body = postRedirected(t, c, srv.URL+"/key/resume", url.Values{"csrf": {m[1]}, "key": {key}})
			if want := fmt.Sprint(http.StatusSeeOther, " ", keyPage); redirect != want {
				t.Errorf("the resume redirects %q, want %q", redirect, want)
			}
			if code != http.StatusOK || !strings.Contains(body, "Key resumed: the workers of its jobs&#39; queues were woken.") ||
				!strings.Contains(body, `data-pause-key="ui.export/acme"`) {
				t.Errorf("after the resume: %d, want the key page saying so, with a Pause button again:\n%s", code, body)
			}
			if ps := paused(); len(ps) != 0 {
				t.Errorf("after the resume: paused keys %v, want none", ps)
			}
			if _, overview := get(t, c, srv.URL+"/"); strings.Contains(overview, `id="paused-keys"`) {
				t.Error("the overview still lists paused keys after the resume")
			}
		})
	}
}
