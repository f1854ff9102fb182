package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/ui"
)

// TestStaleHoldersMarked: a holder whose process stopped heartbeating is
// marked "not heartbeating" on the key's page, on the page of a job
// blocked behind it and on its own page, as `bq explain` marks it.
func TestStaleHoldersMarked(t *testing.T) {
	f := newFixture(t, databases[0])
	ctx := context.Background()
	ex := driver.ClientEngine(f.client).Exec()
	stale, err := ex.ProcessRegister(ctx, driver.Process{Kind: "worker", Name: "gone-worker", Hostname: "host-b",
		PID: 7, Queues: "exports", HeartbeatInterval: time.Second, StartedAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 3 {
		res, err := exportJob.Enqueue(ctx, f.client, exportArgs{Tenant: "initech", Report: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	for range 2 {
		claims, err := lifecycle.Claim(ctx, driver.ClientEngine(f.client), driver.ClaimParams{Queue: "exports", Max: 1, ProcessID: stale, Now: time.Now()})
		if err != nil || len(claims) != 1 {
			t.Fatalf("claim for the stale process: %v %v", claims, err)
		}
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()

	for _, p := range []struct {
		path  string
		marks int
		also  string
	}{
		{"/key?key=" + url.QueryEscape("ui.export/initech"), 2, "gone-worker (#"},
		{fmt.Sprintf("/jobs/%d", ids[2]), 2, "stopped heartbeating while running"},
		{fmt.Sprintf("/jobs/%d", ids[0]), 1, `id="job-process">gone-worker (#`},
	} {
		code, body := get(t, c, srv.URL+p.path)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", p.path, code)
		}
		if n := strings.Count(body, "not heartbeating</span>"); n != p.marks || !strings.Contains(body, p.also) {
			t.Errorf("GET %s: %d holders marked not heartbeating, want %d, and the page lacks %q", p.path, n, p.marks, p.also)
		}
	}
	// The live fixture's holders are not marked.
	if _, body := get(t, c, srv.URL+"/key?key="+url.QueryEscape("ui.export/acme")); strings.Contains(body, "not heartbeating</span>") {
		t.Error("a holder of a live process is marked not heartbeating")
	}
}

// TestNoLiveProcessSaysWhatToStart: with no live process the overview
// and the processes page say what to start, by the names the API and the
// CLI use; with a worker alone, that a dispatcher is missing and which
// queue with ready jobs nobody works.
func TestNoLiveProcessSaysWhatToStart(t *testing.T) {
	f := newFixture(t, databases[0])
	ctx := context.Background()
	ex := driver.ClientEngine(f.client).Exec()
	if err := ex.ProcessDeregister(ctx, f.process); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
	defer srv.Close()
	c := srv.Client()
	for _, path := range []string{"/", "/processes"} {
		_, body := get(t, c, srv.URL+path)
		for _, want := range []string{`id="no-processes"`, "No live process", "client.Run(ctx)", "client.RunWorkers(ctx)", "bq dispatcher --dsn"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s with no process lacks %q", path, want)
			}
		}
	}

	if _, err := ex.ProcessRegister(ctx, driver.Process{Kind: "worker", Name: "exports-only", Hostname: "h", PID: 8,
		Queues: "exports", HeartbeatInterval: time.Hour, StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, c, srv.URL+"/")
	for _, want := range []string{`id="no-dispatcher"`, "bq dispatcher --dsn", `id="unworked"`, "No live process works mail", "no live worker</span>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the overview with a worker of exports alone lacks %q", want)
		}
	}
	if strings.Contains(body, `id="no-processes"`) {
		t.Error("the overview says no process is live beside a live worker")
	}
}
