package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bqueue/bq/internal/driver"

	"github.com/bqueue/bq/ui"
)

// TestSearchAndHistoryRequests: what the search box and the history page
// answer to each kind of query, mounted under a path as an application
// would.
func TestSearchAndHistoryRequests(t *testing.T) {
	f := newFixture(t, databases[0])
	mux := http.NewServeMux()
	mux.Handle("/bq/", http.StripPrefix("/bq", ui.Handler(f.client, ui.Options{Path: "/bq"})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	location := func(q string) (int, string) {
		t.Helper()
		resp, err := c.Get(srv.URL + "/bq/search?q=" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	id := fmt.Sprint(f.keyedFailed)
	for _, c := range []struct{ q, want string }{
		{id, "/bq/jobs/" + id},
		{"+" + id + "+", "/bq/jobs/" + id}, // spaces around are trimmed
		{"ui.export%2Facme", "/bq/key?key=ui.export%2Facme"},
	} {
		if code, loc := location(c.q); code != http.StatusSeeOther || loc != c.want {
			t.Errorf("search %q: %d to %q, want 303 to %q", c.q, code, loc, c.want)
		}
	}
	// A tenant whose name is a job id: both are shown.
	if _, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: id}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, c, srv.URL+"/bq/search?q="+id)
	if code != http.StatusOK || !strings.Contains(body, `id="search-job"`) || !strings.Contains(body, `data-key="ui.export/`+id+`"`) {
		t.Errorf("search %s (a job id and a tenant): %d, want the job and the key listed", id, code)
	}
	for _, p := range []struct {
		path string
		code int
		want string
	}{
		{"/bq/search?q=", http.StatusOK, "Search for a job id"},
		{"/bq/search?q=nobody", http.StatusOK, "Keys are group/key"},
		{"/bq/search?q=999999", http.StatusOK, "No job has id 999999"},
		{"/bq/search?q=ui.export%2F", http.StatusOK, `href="/bq/key?key=ui.export%2Facme"`},
		{"/bq/search?q=%2Facme", http.StatusOK, `href="/bq/key?key=ui.export%2Facme"`},
		{"/bq/search?q=%2Fnobody", http.StatusOK, "No key in use ends with /nobody"},
		{"/bq/search?q=%FF", http.StatusBadRequest, "not valid UTF-8"},
		{"/bq/history", http.StatusOK, `id="chart-throughput"`},
		{"/bq/history?since=24h&queue=exports", http.StatusOK, `aria-current="page">24h`},
		{"/bq/history?since=forever", http.StatusOK, `aria-current="page">1h`},
		{"/bq/history?queue=no+such+queue", http.StatusBadRequest, "queue name"},
	} {
		code, body := get(t, c, srv.URL+p.path)
		if code != p.code || !strings.Contains(body, p.want) {
			t.Errorf("GET %s: %d, want %d with %q", p.path, code, p.code, p.want)
		}
	}
}

// TestOverviewWithoutHistory: a history that cannot be read costs the
// overview its charts, not its counts.
func TestOverviewWithoutHistory(t *testing.T) {
	f := newFixture(t, databases[0])
	if _, err := driver.ClientEngine(f.client).SQLDB().Exec("DROP TABLE bq_history"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()
	code, body := get(t, srv.Client(), srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, `id="history-error"`) || !strings.Contains(body, `<tr data-queue="exports">`) {
		t.Errorf("the overview without its history table: %d, want 200 with the queues and the history's error", code)
	}
}
