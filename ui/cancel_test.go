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
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/ui"
)

// TestCancelAction: the job page of a running job offers Cancel; the
// POST marks the run, the notice says the run is being stopped, and the
// page then shows the pending cancel with no second button. A cancel of
// a finished job answers 409 saying nothing changed, and one without the
// form token changes nothing.
func TestCancelAction(t *testing.T) {
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	c.Jar, _ = cookiejar.New(nil)
	own, err := driver.ClientEngine(f.client).Exec().ClaimListOfProcess(context.Background(), f.process)
	if err != nil || len(own) == 0 {
		t.Fatalf("running jobs of the fixture: %v, %v", own, err)
	}
	running := own[0].JobID
	page := fmt.Sprintf("%s/jobs/%d", srv.URL, running)
	_, body := get(t, c, page)
	if !strings.Contains(body, fmt.Sprintf(`data-cancel="%d"`, running)) {
		t.Fatalf("the running job's page has no Cancel button:\n%s", body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF field")
	}
	post := func(id int64, form url.Values) (int, string) {
		t.Helper()
		resp, err := c.PostForm(fmt.Sprintf("%s/jobs/%d/cancel", srv.URL, id), form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post(running, url.Values{"next": {"/"}}); code < 400 {
		t.Errorf("a cancel without the form token: %d, want it refused", code)
	}
	if info, _ := f.client.Explain(context.Background(), running); !info.CancelRequestedAt.IsZero() {
		t.Fatal("a refused cancel marked the run")
	}
	code, body := post(running, url.Values{"csrf": {m[1]}})
	if code != http.StatusOK || !strings.Contains(body, "cancel requested; its run is being stopped") {
		t.Errorf("after the cancel: %d, want the job page saying the run is being stopped:\n%s", code, body)
	}
	if !strings.Contains(body, "Cancel requested at") || strings.Contains(body, fmt.Sprintf(`data-cancel="%d"`, running)) {
		t.Errorf("the job page after the cancel shows no pending cancel, or a second button:\n%s", body)
	}
	if _, err := f.client.Cancel(context.Background(), f.mailReady); err != nil {
		t.Fatal(err)
	}
	code, body = post(f.mailReady, url.Values{"csrf": {m[1]}})
	if code != http.StatusConflict || !strings.Contains(body, "nothing changed") {
		t.Errorf("cancel of a cancelled job: %d, want 409 saying nothing changed:\n%s", code, body)
	}
	if st, _ := f.client.Job(context.Background(), f.mailReady); st.State != bq.StateCancelled {
		t.Errorf("the cancelled job is %s after a second cancel", st.State)
	}
}
