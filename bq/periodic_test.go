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
}
