package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/testdb"
	"github.com/bqueue/bq/ui"
)

// bumpFree adds one free slot to key's semaphore behind bq's back: the
// drift the Verify page finds.
func bumpFree(t *testing.T, c *bq.Client, db, key string) {
	t.Helper()
	q := `UPDATE bq_semaphores SET value = value + 1 WHERE "key" = ?`
	switch db {
	case testdb.Postgres:
		q = `UPDATE bq_semaphores SET value = value + 1 WHERE "key" = $1`
	case testdb.MySQL:
		q = "UPDATE bq_semaphores SET value = value + 1 WHERE `key` = ?"
	}
	res, err := driver.ClientEngine(c).SQLDB().ExecContext(context.Background(), q, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("bump the semaphore of %q: %d rows updated, want 1", key, n)
	}
}

// TestVerifyPage: the Verify page (in the nav) shows how many semaphores
// it checked and no drift on a consistent database; a semaphore drifted
// by a raw UPDATE shows in its table, its key linked to the key's page,
// and is left as it is by the page. The Repair button is a POST form with
// the other forms' protections (the CSRF token, same-origin only, 405
// for other methods); with them it mends the drift and the page says so,
// once. Claims of a dead process show by their jobs, linked, and Repair
// reaps them.
func TestVerifyPage(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			const key = "ui.export/acme" // limit 2: 2 running, 3 blocked
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			c := srv.Client()
			c.Jar, _ = cookiejar.New(nil)
			free := func() int {
				t.Helper()
				k, err := f.client.KeyState(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				return k.Free
			}

			code, body := get(t, c, srv.URL+"/verify")
			for _, want := range []string{`<a href="/verify" aria-current="page">Verify</a>`,
				`<dd class="semaphores">1</dd>`, `<dd class="drift">0</dd>`, "No drift: every semaphore matches"} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET /verify of a consistent database: %d, body lacks %q", code, want)
				}
			}
			if strings.Contains(body, `id="drift"`) || strings.Contains(body, `action="/verify/repair"`) {
				t.Errorf("GET /verify shows drift, or a Repair button, with none:\n%s", body)
			}
			if _, body := get(t, c, srv.URL+"/"); !strings.Contains(body, `href="/verify"`) {
				t.Error("the overview's nav does not link the Verify page")
			}

			bumpFree(t, f.client, db.name, key)
			code, body = get(t, c, srv.URL+"/verify")
			for _, want := range []string{`<dd class="drift">1</dd>`, `<tr data-drift="free">`,
				`<a href="/key?key=ui.export%2Facme">ui.export/acme</a>`, `<td class="detail">free 1, want 0 (limit 2, 2 holders)</td>`,
				`action="/verify/repair"`} {
				if code != http.StatusOK || !strings.Contains(body, want) {
					t.Errorf("GET /verify with drift: %d, body lacks %q", code, want)
				}
			}
			if free() != 1 {
				t.Fatalf("the page changed the drifted semaphore: free %d, want 1 as the UPDATE left it", free())
			}
			m := csrfField.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no CSRF field on the Verify page:\n%s", body)
			}

			post := func(form url.Values, header http.Header) (int, string) {
				t.Helper()
				return postForm(t, c, srv.URL+"/verify/repair", form, header)
			}
			if code, _ := post(url.Values{}, nil); code != http.StatusForbidden {
				t.Errorf("a repair without the form token: %d, want 403", code)
			}
			if code, _ := post(url.Values{"csrf": {"forged"}}, nil); code != http.StatusForbidden {
				t.Errorf("a repair with a wrong form token: %d, want 403", code)
			}
			if code, _ := post(url.Values{"csrf": {m[1]}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); code != http.StatusForbidden {
				t.Errorf("a cross-site repair: %d, want 403", code)
			}
			if code, _ := get(t, c, srv.URL+"/verify/repair"); code != http.StatusMethodNotAllowed {
				t.Errorf("GET /verify/repair: %d, want 405", code)
			}
			if free() != 1 {
				t.Fatalf("a refused repair mended the semaphore: free %d, want 1", free())
			}

			code, body = post(url.Values{"csrf": {m[1]}}, nil)
			if code != http.StatusOK || !strings.Contains(body, "Repaired 1 drift: drifted semaphores were recounted") ||
				!strings.Contains(body, "No drift: every semaphore matches") {
				t.Errorf("after the repair: %d, want the Verify page saying what was repaired, and no drift left:\n%s", code, body)
			}
			if k, err := f.client.KeyState(ctx, key); err != nil || k.Free != 0 || k.Blocked != 3 {
				t.Errorf("after the repair, the key: %+v, %v; want 0 free, 3 blocked", k, err)
			}
			if _, body := get(t, c, srv.URL+"/verify"); strings.Contains(body, "Repaired") {
				t.Error("the notice shows again on the next visit: it must be told once")
			}

			// worker-1's row gone (a process deleted as dead, say), its two
			// claims are unreaped: each shows by its job, linked.
			q := "DELETE FROM bq_processes WHERE id = ?"
			if db.name == testdb.Postgres {
				q = "DELETE FROM bq_processes WHERE id = $1"
			}
			if _, err := driver.ClientEngine(f.client).SQLDB().ExecContext(ctx, q, f.process); err != nil {
				t.Fatal(err)
			}
			rep, err := f.client.Verify(ctx, bq.VerifyOptions{})
			if err != nil || len(rep.Drift) != 2 {
				t.Fatalf("Verify with worker-1 gone: %+v, %v; want its 2 claims unreaped", rep, err)
			}
			_, body = get(t, c, srv.URL+"/verify")
			for _, d := range rep.Drift {
				want := fmt.Sprintf(`<a href="/key?key=ui.export%%2Facme">ui.export/acme</a></td>
<td><a href="/jobs/%d">%d</a></td>`, d.JobID, d.JobID)
				if d.Kind != bq.DriftUnreaped || !strings.Contains(body, want) {
					t.Errorf("GET /verify with unreaped claims lacks the row of job %d (%s):\n%s", d.JobID, want, body)
				}
			}
			// Repair reaps them by one dispatcher pass: ready again.
			code, body = post(url.Values{"csrf": {m[1]}}, nil)
			if code != http.StatusOK || !strings.Contains(body, "Repaired 2 drifts") || !strings.Contains(body, "No drift: every semaphore matches") {
				t.Errorf("after repairing the unreaped claims: %d, want the page saying 2 were repaired, none left:\n%s", code, body)
			}
			for _, d := range rep.Drift {
				if st := f.state(t, d.JobID); st != bq.StateReady {
					t.Errorf("job %d after the repair: %s, want ready (reaped)", d.JobID, st)
				}
			}
		})
	}
}
