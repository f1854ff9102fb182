package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

type reportArgs struct{ Day string }

var reportJob = bq.Define("ui.report", func(context.Context, reportArgs) error { return nil },
	bq.JobOptions[reportArgs]{Queue: "reports"})

// browsePeriodic: a process with a periodic job ticks once (RunOnStart);
// the Periodic page shows its schedule, next and last run, and links its
// last job to the job's page.
func browsePeriodic(t *testing.T, b *session, f *fixture) {
	ctx := context.Background()
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
	ps, err := c.PeriodicJobs(ctx)
	if err != nil || len(ps) != 1 || ps[0].LastJobID == 0 {
		t.Fatalf("PeriodicJobs = %+v, %v: want hourly-report's first job", ps, err)
	}
	job := ps[0].LastJobID

	b.open("/", "#queues")
	b.run("open the periodic page", chromedp.Click(chromedp.CSS(`nav a[href$="/periodic"]`)),
		chromedp.WaitVisible(chromedp.CSS("#periodic")))
	row := `tr[data-periodic="hourly-report"]`
	b.wantContains(row, "ui.report")
	b.wantContains(row+" code", "@every 1h0m0s")
	b.wantContains(row, "in ")   // the next run, within the hour
	b.wantContains(row, " ago")  // the last run, just now
	b.wantContains(row, "ready") // its job's state
	b.screenshot("periodic")
	b.run("open the last job", chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[data-last-job="%d"]`, job))),
		chromedp.WaitVisible(chromedp.CSS("#summary")))
	b.wantText("#job-state", "ready")
	b.wantContains("#args", time.Now().UTC().Format(time.DateOnly))
}
