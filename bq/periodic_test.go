package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// periodicDB returns the DSN of a SQLite database where the periodic job
// "nightly" (03:00 in Paris) ticked once, on 1 December 2026, and its job
// id. No process runs it now, so its row reads as stale.
func periodicDB(t *testing.T) (string, int64) {
	t.Helper()
	ctx := context.Background()
	_, dsn := migratedSQLite(t)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database")
	}
	now := time.Date(2026, 12, 1, 2, 59, 30, 0, paris)
	nightly := bq.Periodic(bq.Cron("0 3 * * *", paris), inspectJob,
		func(time.Time) inspectArgs { return inspectArgs{Account: "nightly"} },
		bq.PeriodicOptions{Name: "nightly"})
	c, err := bq.Open(ctx, dsn, bq.Config{Periodic: []*bq.PeriodicJob{nightly}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, at := range []time.Time{now, now.Add(31 * time.Second)} { // store it; tick
		now = at
		if err := driver.PeriodicPass(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := c.PeriodicJobs(ctx)
	if err != nil || len(ps) != 1 || ps[0].LastJobID == 0 {
		t.Fatalf("PeriodicJobs = %+v, %v: want nightly's first job", ps, err)
	}
	return dsn, ps[0].LastJobID
}

func TestStatusPeriodic(t *testing.T) {
	dsn, id := periodicDB(t)
	text, err := runCmd(runStatus, "--dsn", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`PERIODIC JOBS\nNAME +KIND +SCHEDULE +NEXT RUN +LAST RUN +LAST JOB\n`).MatchString(text) ||
		!regexp.MustCompile(`nightly +cli_test.inspect +CRON_TZ=Europe/Paris 0 3 \* \* \* +- \(no live process`).MatchString(text) ||
		!strings.Contains(text, "ago  "+strconv.FormatInt(id, 10)+" (ready)") {
		t.Errorf("bq status lacks nightly's schedule, runs and job %d:\n%s", id, text)
	}
	text, err = runCmd(runStatus, "--dsn", dsn, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var h bq.Health
	if err := json.Unmarshal([]byte(text), &h); err != nil || len(h.Periodic) != 1 {
		t.Fatalf("bq status --json: %v, %+v", err, h.Periodic)
	}
	p := h.Periodic[0]
	if p.Name != "nightly" || p.Schedule != "CRON_TZ=Europe/Paris 0 3 * * *" || p.LastJobID != id || p.LastState != bq.StateReady ||
		p.LastRunAt == nil || p.LastRunAt.UTC().Hour() != 2 || p.NextRunAt.UTC().Day() != 2 {
		t.Errorf("bq status --json periodic = %+v: want nightly, last run 03:00 Paris (02:00 UTC) with job %d, next tomorrow", p, id)
	}

	// The job ran and failed: its state now, not the ready of its enqueue
	// (which reads as stuck); gone once retention deleted it.
	ctx := context.Background()
	c, err := bq.Open(ctx, dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, claims := claimAs(t, c, "periodic-worker", "cli", 1, time.Hour)
	eng := driver.ClientEngine(c)
	if err := driver.InTx(ctx, eng, func(ex driver.Executor) error {
		_, err := lifecycle.Fail(ctx, ex, claims[0], "boom", time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if text, err = runCmd(runStatus, "--dsn", dsn); err != nil || !strings.Contains(text, "ago  "+strconv.FormatInt(id, 10)+" (failed)") {
		t.Errorf("bq status after nightly's job failed: %v\n%s\nwant job %d (failed)", err, text, id)
	}
	if text, err = runCmd(runStatus, "--dsn", dsn, "--json"); err != nil || !strings.Contains(text, `"last_state": "ready"`) ||
		!strings.Contains(text, `"last_job_state": "failed"`) {
		t.Errorf("bq status --json after nightly's job failed: %v\n%s\nwant last_state ready (at enqueue), last_job_state failed", err, text)
	}
	if err := driver.InTx(ctx, eng, func(ex driver.Executor) error { return ex.JobDeleteMany(ctx, []int64{id}) }); err != nil {
		t.Fatal(err)
	}
	if text, err = runCmd(runStatus, "--dsn", dsn); err != nil || !strings.Contains(text, "ago  "+strconv.FormatInt(id, 10)+" (deleted)") {
		t.Errorf("bq status after retention deleted nightly's job: %v\n%s\nwant job %d (deleted)", err, text, id)
	}
}
