package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/bqueue/bq/ui"
)

// TestQueuePauseButton: the overview's queue row pauses and resumes its
// queue by a POST carrying the form token; the row shows a paused badge;
// a GET, a missing token or a bad name changes nothing.
func TestQueuePauseButton(t *testing.T) {
	f := newFixture(t, databases[0])
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	jar, _ := cookiejar.New(nil)
	c.Jar = jar
	_, page := get(t, c, srv.URL+"/")
	m := csrfField.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `data-pause="mail"`) {
		t.Fatalf("the overview has no pause button for queue mail:\n%s", page)
	}
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		resp, err := c.PostForm(srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	paused := func() bool {
		t.Helper()
		ps, err := f.client.PausedQueues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(ps) == 1 && ps[0].Queue == "mail"
	}

	if code, _ := get(t, c, srv.URL+"/queues/mail/pause"); code != http.StatusMethodNotAllowed || paused() {
		t.Errorf("GET of the pause action: %d, paused %v; want 405 and nothing paused", code, paused())
	}
	if code, _ := post("/queues/mail/pause", url.Values{}); code != http.StatusForbidden || paused() {
		t.Errorf("POST without the form token: %d, paused %v; want 403 and nothing paused", code, paused())
	}
	if code, body := post("/queues/bad%20name/pause", url.Values{"csrf": {m[1]}}); code != http.StatusBadRequest || !strings.Contains(body, "queue name") {
		t.Errorf("POST for a bad queue name: %d, want 400 naming the rule:\n%s", code, body)
	}
	code, body := post("/queues/mail/pause", url.Values{"csrf": {m[1]}})
	if code != http.StatusOK || !paused() || !strings.Contains(body, "Queue mail paused") ||
		!strings.Contains(body, `class="state paused"`) || !strings.Contains(body, `data-resume="mail"`) {
		t.Fatalf("pause: %d, paused %v; want the overview telling it, with a paused badge and a resume button:\n%s", code, paused(), body)
	}
	if code, body := post("/queues/mail/resume", url.Values{"csrf": {m[1]}}); code != http.StatusOK || paused() || !strings.Contains(body, "Queue mail resumed") {
		t.Errorf("resume: %d, paused %v:\n%s", code, paused(), body)
	}
}
