package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// TestJobsPage: the Jobs page filters by its GET parameters, pages with
// a link carrying the filters on, refuses a bad filter with 400 and the
// error's words, and the search box finds jobs by tag and by key=value.
func TestJobsPage(t *testing.T) {
	f := newFixture(t, databases[0])
	ctx := context.Background()
	res, err := mailJob.Enqueue(ctx, f.client, mailArgs{To: "t@example.com"},
		bq.WithMetadata(map[string]string{"tenant": "initech"}), bq.WithTags("vip"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	row := fmt.Sprintf(`data-job="%d"`, res.ID)
	rows := regexp.MustCompile(`<tr data-job="\d+">`)

	code, body := get(t, c, srv.URL+"/jobs/?meta=tenant%3Dinitech")
	if code != http.StatusOK || len(rows.FindAllString(body, -1)) != 1 || !strings.Contains(body, row) {
		t.Errorf("metadata filter: %d with %d rows, want 200 with job %d alone", code, len(rows.FindAllString(body, -1)), res.ID)
	}
	code, body = get(t, c, srv.URL+"/jobs/?queue=mail&limit=2")
	next := regexp.MustCompile(`id="jobs-next" href="([^"]+)"`).FindStringSubmatch(body)
	if code != http.StatusOK || len(rows.FindAllString(body, -1)) != 2 || next == nil {
		t.Fatalf("a page of 2 mail jobs: %d with %d rows and next %v", code, len(rows.FindAllString(body, -1)), next)
	}
	code, body = get(t, c, srv.URL+html.UnescapeString(next[1]))
	if code != http.StatusOK || len(rows.FindAllString(body, -1)) == 0 || strings.Contains(body, row) {
		t.Errorf("the next page %s: %d with %d rows, want older mail jobs only", next[1], code, len(rows.FindAllString(body, -1)))
	}
	for _, bad := range []struct{ query, want string }{
		{"state=done", "use one of scheduled"},
		{"key=a%2Fb&key_prefix=a%2F", "KeyPrefix"},
		{"created_after=yesterday", "RFC 3339"},
		{"meta=novalue", "key=value"},
		{"limit=x", "whole number"},
	} {
		code, body := get(t, c, srv.URL+"/jobs/?"+bad.query)
		if code != http.StatusBadRequest || !strings.Contains(html.UnescapeString(body), bad.want) {
			t.Errorf("/jobs/?%s: %d, want 400 saying %q", bad.query, code, bad.want)
		}
	}
	code, body = get(t, c, srv.URL+"/search?q=vip")
	if code != http.StatusOK || !strings.Contains(body, `id="search-tagged"`) || !strings.Contains(body, row) {
		t.Errorf("search vip: %d, want the tagged job listed", code)
	}
	code, body = get(t, c, srv.URL+"/search?q=tenant%3Dinitech")
	if code != http.StatusOK || !strings.Contains(body, row) {
		t.Errorf("search tenant=initech: %d, want it to land on the jobs carrying it", code)
	}
	code, body = get(t, c, srv.URL+"/search?q=nothing-here")
	if code != http.StatusOK || !strings.Contains(body, "no job is tagged nothing-here") || !strings.Contains(body, "key=value") {
		t.Errorf("search for nothing: %d, want a hint naming tags and key=value", code)
	}
	code, body = get(t, c, fmt.Sprintf("%s/jobs/%d", srv.URL, res.ID))
	if code != http.StatusOK || !strings.Contains(body, `id="job-metadata"`) || !strings.Contains(body, "tenant=initech") || !strings.Contains(body, `id="job-tags"`) {
		t.Errorf("the job's page: %d, want its metadata and tags", code)
	}
	heavy, err := exportJob.Enqueue(ctx, f.client, exportArgs{Tenant: "slots"}, bq.Slots(2))
	if err != nil {
		t.Fatal(err)
	}
	code, body = get(t, c, fmt.Sprintf("%s/jobs/%d", srv.URL, heavy.ID))
	if code != http.StatusOK || !strings.Contains(body, `id="job-slots"`) || !strings.Contains(body, "It takes 2 slots of key") {
		t.Errorf("the page of a job of 2 slots: %d, want its slots in the facts and the summary", code)
	}
}
