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
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
	"github.com/bqueue/bq/ui"
)

// TestPeriodicLastJobNow: the Periodic page shows the last job's state
// as it is now, not as admission left it at enqueue (issue 38: a job
// still "ready" an hour after it ran reads as stuck): ready, then failed
// once it ran and failed, then deleted once retention took it.
func TestPeriodicLastJobNow(t *testing.T) {
	for _, db := range selectedDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, db)
			hourly := bq.Periodic(bq.Every(time.Hour), reportJob,
				func(tick time.Time) reportArgs { return reportArgs{Day: tick.Format(time.DateOnly)} },
				bq.PeriodicOptions{Name: "hourly-report", RunOnStart: true})
			// A second client on the fixture's pool (not closed: it would close the pool).
			c, err := bq.NewClient(f.client.Driver(), bq.Config{NoGauges: true, Periodic: []*bq.PeriodicJob{hourly},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := driver.PeriodicPass(ctx, c); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(ui.Handler(f.client, ui.Options{}))
			defer srv.Close()
			lastState := func() string {
				t.Helper()
				code, body := get(t, srv.Client(), srv.URL+"/periodic")
				if code != http.StatusOK {
					t.Fatalf("/periodic: %d", code)
				}
				_, row, _ := strings.Cut(body, `<tr data-periodic="hourly-report">`)
				_, state, _ := strings.Cut(row, `data-last-state="`)
				state, _, _ = strings.Cut(state, `"`)
				return state
			}
			if got := lastState(); got != "ready" {
				t.Errorf("after the tick, the last job shows %q, want ready", got)
			}
			cl := f.claim(t, "reports")
			err = driver.InTx(ctx, driver.ClientEngine(f.client), func(ex driver.Executor) error {
				_, err := lifecycle.Fail(ctx, ex, cl, "boom", time.Now())
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := lastState(); got != "failed" {
				t.Errorf("once its run failed, the last job shows %q, want failed (its state now, not ready as enqueued)", got)
			}
			err = driver.InTx(ctx, driver.ClientEngine(f.client), func(ex driver.Executor) error {
				return ex.JobDeleteMany(ctx, []int64{cl.ID})
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := lastState(); got != "deleted" {
				t.Errorf("once retention deleted it, the last job shows %q, want deleted", got)
			}
			if code, body := get(t, srv.Client(), srv.URL+"/periodic"); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`data-last-job="%d"`, cl.ID)) {
				t.Errorf("/periodic: %d, want job %d still named", code, cl.ID)
			}
		})
	}
}
