package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/ui"
)

type ledgerArgs struct{ Account string }

var ledgerJob = bq.Define("ui.ledger", func(context.Context, ledgerArgs) error { return nil },
	bq.JobOptions[ledgerArgs]{Queue: "ledger", Concurrency: &bq.Concurrency[ledgerArgs]{
		Key: func(a ledgerArgs) string { return a.Account }, Sequence: true}})

// TestPagesSaySequence: the job page and the key page of a sequence say
// so; a job that is not a sequence's shows no such fact.
func TestPagesSaySequence(t *testing.T) {
	f := newFixture(t, databases[0])
	seq, err := ledgerJob.Enqueue(context.Background(), f.client, ledgerArgs{Account: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	for path, want := range map[string]string{
		fmt.Sprintf("/jobs/%d", seq.ID): `<dd id="sequence">`,
		"/key?key=ui.ledger%2Fa1":       `<dd id="key-sequence">`,
	} {
		if code, page := get(t, srv.Client(), srv.URL+path); code != http.StatusOK || !strings.Contains(page, want) {
			t.Errorf("%s: %d, want the sequence shown (%s)", path, code, want)
		}
	}
	// A job that is not a sequence's says nothing of one.
	if _, page := get(t, srv.Client(), fmt.Sprintf("%s/jobs/%d", srv.URL, f.mailReady)); strings.Contains(page, `id="sequence"`) {
		t.Errorf("a plain job's page shows a sequence")
	}
}
