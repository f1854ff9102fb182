package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// TestExpectedStartShown: once its key has a release interval, a blocked
// job's page shows its expected start (place × interval) and the key's
// page the interval; neither shows while none was measured.
func TestExpectedStartShown(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			const key = "ui.export/acme"
			f, srv, c, keyPage := keyForms(t, db, key)
			res, err := exportJob.Enqueue(context.Background(), f.client, exportArgs{Tenant: "acme", Report: "eta"})
			if err != nil || res.State != bq.StateBlocked || !res.ExpectedStart.IsZero() {
				t.Fatalf("enqueue: %+v, %v; want blocked with no expected start (no interval measured)", res, err)
			}
			jobPage := fmt.Sprintf("/jobs/%d", res.ID)
			if _, page := get(t, c, srv.URL+jobPage); strings.Contains(page, `id="expected-start"`) {
				t.Error("the job page shows an expected start while its key has no release interval")
			}
			if _, page := get(t, c, srv.URL+keyPage); strings.Contains(page, `id="key-interval"`) {
				t.Error("the key page shows a release interval while none was measured")
			}
			if _, err := driver.ClientEngine(f.client).SQLDB().ExecContext(context.Background(),
				`UPDATE bq_semaphores SET release_interval_us = 240000`); err != nil {
				t.Fatal(err)
			}
			code, page := get(t, c, srv.URL+jobPage)
			// 4th in line (3 blocked ahead): 4 × 240ms.
			for _, want := range []string{`id="expected-start"`, "release interval 240ms", "expected to start in about 960ms"} {
				if code != http.StatusOK || !strings.Contains(page, want) {
					t.Errorf("job page: %d, lacks %q", code, want)
				}
			}
			code, page = get(t, c, srv.URL+keyPage)
			if code != http.StatusOK || !strings.Contains(page, `id="key-interval"`) || !strings.Contains(page, "240ms") {
				t.Errorf("key page: %d, does not show the release interval", code)
			}
		})
	}
}
