package bq_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/bqueue/bq"
)

// A periodic job is listed in Config.Periodic of the processes that run
// it; each tick is enqueued once across all of them, through the job's
// concurrency key like any enqueue. RunOnStart ticks at once when the
// schedule is new.
func ExamplePeriodic() {
	dir, _ := os.MkdirTemp("", "bq-example")
	defer os.RemoveAll(dir)
	hourly := bq.Periodic(bq.Every(time.Hour), Export,
		func(tick time.Time) ExportArgs { return ExportArgs{Tenant: "acme", Report: tick.UTC().Format("15:04")} },
		bq.PeriodicOptions{Name: "hourly-export", RunOnStart: true})
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx := context.Background()
	client, err := bq.Open(ctx, "sqlite://"+filepath.Join(dir, "jobs.db"),
		bq.Config{Logger: quiet, Periodic: []*bq.PeriodicJob{hourly}})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	_ = client.Migrate(ctx)

	run, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- client.Run(run) }()
	var p bq.PeriodicStatus
	for deadline := time.Now().Add(10 * time.Second); p.LastJobID == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ps, _ := client.PeriodicJobs(ctx); len(ps) == 1 {
			p = ps[0]
		}
	}
	stop()
	<-done
	fmt.Println(p.Name, p.Schedule, p.LastState, p.NextRunAt.Sub(*p.LastRunAt) <= time.Hour)
	// Output: hourly-export @every 1h0m0s ready true
}
