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
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

type syncArgs struct{ Tenant string }

// syncJob allows one start an hour per tenant: of three jobs of a key,
// the first is ready and two wait in the key's line.
var syncJob = bq.Define("ui.sync", func(context.Context, syncArgs) error { return nil },
	bq.JobOptions[syncArgs]{Queue: "sync", Rate: &bq.Rate[syncArgs]{
		Key: func(a syncArgs) string { return a.Tenant }, Limit: 1, Period: time.Hour}})

// TestRatePages: the Rates page lists a rate key with its rate, recent
// starts and waiting jobs, linking to the key's page, which shows its
// line (job links) and a form that sets and clears an override with the
// Cancel button's CSRF protection; a job waiting for a start shows the
// rate on its page. Bad form input is 400 with the reason.
func TestRatePages(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			var ids []int64
			for range 3 {
				res, err := syncJob.Enqueue(ctx, f.client, syncArgs{Tenant: "acme"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.ID)
			}
			const key = "ui.sync/acme"
			keyPage := "/rate?key=" + url.QueryEscape(key)
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := srv.Client()
			c.Jar, _ = cookiejar.New(nil)

			code, body := get(t, c, srv.URL+"/rates")
			for _, want := range []string{`aria-current="page">Rates</a>`, `<tr data-rate="ui.sync/acme">`,
				`<a href="` + keyPage + `">ui.sync/acme</a>`, `<td class="rate">1/1h0m0s</td>`, `<td class="num waiting">2</td>`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET /rates: %d, body lacks %q:\n%s", code, want, body)
				}
			}
			if _, body := get(t, c, srv.URL+"/"); !strings.Contains(body, `href="/rates"`) {
				t.Error("the nav has no Rates link")
			}

			code, body = get(t, c, srv.URL+keyPage)
			for _, want := range []string{`<dd class="rate">1 starts per 1h0m0s</dd>`, `<dd class="waiting">2</dd>`,
				fmt.Sprintf(`<a href="/jobs/%d">%d</a>`, ids[1], ids[1]), fmt.Sprintf(`<a href="/jobs/%d">%d</a>`, ids[2], ids[2]),
				`action="/rate/set"`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET %s: %d, body lacks %q:\n%s", keyPage, code, want, body)
				}
			}
			if strings.Contains(body, `action="/rate/clear"`) {
				t.Error("the key page offers to clear an override none set")
			}
			m := csrfField.FindStringSubmatch(body)
			if m == nil {
				t.Fatal("no CSRF field on the rate key page")
			}

			code, body = get(t, c, fmt.Sprintf("%s/jobs/%d", srv.URL, ids[2]))
			for _, want := range []string{"Waiting for the rate limit of key", `<dd id="rate-key"><a href="` + keyPage + `">ui.sync/acme</a> (1/1h0m0s)</dd>`,
				`id="job-rate"`, `<dd id="position">2</dd>`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("the waiting job's page: %d, body lacks %q:\n%s", code, want, body)
				}
			}

			post := func(action string, form url.Values) (int, string) {
				t.Helper()
				resp, err := c.PostForm(srv.URL+"/rate/"+action, form)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			state := func() *bq.RateState {
				t.Helper()
				st, err := f.client.RateState(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			if code, _ := post("set", url.Values{"key": {key}, "limit": {"5"}, "period": {"1s"}}); code != http.StatusForbidden {
				t.Errorf("a set without the form token: %d, want 403", code)
			}
			if st := state(); st.Overridden {
				t.Fatal("a refused set overrode the rate")
			}
			for _, bad := range []struct {
				form url.Values
				want string
			}{
				{url.Values{"key": {key}, "limit": {"five"}, "period": {"1s"}}, `Limit &#34;five&#34;: write a whole number`},
				{url.Values{"key": {key}, "limit": {"5"}, "period": {"soon"}}, `Period &#34;soon&#34;: write a duration`},
				{url.Values{"key": {key}, "limit": {"0"}, "period": {"1s"}}, "Limit is 0: use 1 to 10000"},
				{url.Values{"key": {key}, "limit": {"5"}, "period": {"1500us"}}, "use whole milliseconds"},
				{url.Values{"limit": {"5"}, "period": {"1s"}}, "names no rate key"},
			} {
				bad.form.Set("csrf", m[1])
				if code, body := post("set", bad.form); code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
					t.Errorf("set %v: %d, want 400 saying %q:\n%s", bad.form, code, bad.want, body)
				}
			}
			if st := state(); st.Overridden {
				t.Fatal("a bad set overrode the rate")
			}

			code, body = post("set", url.Values{"csrf": {m[1]}, "key": {key}, "limit": {"5"}, "period": {"2s"}})
			if code != http.StatusOK || !strings.Contains(body, "Rate set to 5 starts per 2s") ||
				!strings.Contains(body, `<dd class="rate">5 starts per 2s <span class="state paused override">override</span></dd>`) ||
				!strings.Contains(body, `action="/rate/clear"`) {
				t.Errorf("after the set: %d, want the key page with the notice, the override and a Clear button:\n%s", code, body)
			}
			if st := state(); !st.Overridden || st.Limit != 5 || st.Period != 2*time.Second || st.Waiting != 0 {
				t.Errorf("rate after the set: %+v, want 5 per 2s overridden, the waiting jobs readied", st)
			}
			if _, body := get(t, c, srv.URL+"/rates"); !strings.Contains(body, `<td class="rate">5/2s <span class="state paused override">override</span></td>`) {
				t.Errorf("the Rates page does not mark the override:\n%s", body)
			}
			code, body = post("clear", url.Values{"csrf": {m[1]}, "key": {key}})
			if code != http.StatusOK || !strings.Contains(body, "Rate override cleared") {
				t.Errorf("after the clear: %d, want the key page saying the override is cleared:\n%s", code, body)
			}
			if st := state(); st.Overridden {
				t.Errorf("rate after the clear: %+v, want no override", st)
			}

			if code, _ := get(t, c, srv.URL+"/rate/set"); code != http.StatusMethodNotAllowed {
				t.Errorf("GET /rate/set: %d, want 405", code)
			}
			if code, body := get(t, c, srv.URL+"/rate"); code != http.StatusBadRequest || !strings.Contains(body, "Name a rate key") {
				t.Errorf("GET /rate without a key: %d, want 400 naming the parameter", code)
			}
			if code, _ := get(t, c, srv.URL+"/rate?key="+url.QueryEscape("ui.sync/a\x00b")); code != http.StatusBadRequest {
				t.Errorf("GET /rate of a key no job could have: %d, want 400", code)
			}
		})
	}
}
