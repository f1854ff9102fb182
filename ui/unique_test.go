package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

// TestJobPageSaysUnique: a unique job's page names its unique key; a
// job that is not unique shows no such fact.
func TestJobPageSaysUnique(t *testing.T) {
	f := newFixture(t, databases[0])
	ctx := context.Background()
	unique, err := mailJob.Enqueue(ctx, f.client, mailArgs{To: "u@example.com"}, bq.WithUnique(bq.Unique{ByArgs: true}))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := mailJob.Enqueue(ctx, f.client, mailArgs{To: "p@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	fact := regexp.MustCompile(`<dd id="unique-key">key [0-9a-f]{64}</dd>`)
	if code, page := get(t, srv.Client(), fmt.Sprintf("%s/jobs/%d", srv.URL, unique.ID)); code != http.StatusOK || !fact.MatchString(page) {
		t.Errorf("page of unique job %d: %d, want its unique key shown", unique.ID, code)
	}
	if code, page := get(t, srv.Client(), fmt.Sprintf("%s/jobs/%d", srv.URL, plain.ID)); code != http.StatusOK || regexp.MustCompile(`unique-key`).MatchString(page) {
		t.Errorf("page of plain job %d: %d, want no unique key", plain.ID, code)
	}
}
