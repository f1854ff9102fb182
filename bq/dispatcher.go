package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/bqueue/bq"
)

func runDispatcher(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "dispatcher", "dispatcher --dsn DSN [--prefix bq_] [--interval 1s]",
		`Runs the dispatcher until SIGINT or SIGTERM: it admits due scheduled jobs,
promotes blocked jobs beside free slots, reaps the claims of dead worker
processes, reclaims expired concurrency slots and deletes finished jobs
past retention. It needs no job code. Workers started with client.Run
embed a dispatcher already; run this one when workers use RunWorkers.
Having no job code, it enqueues no periodic jobs: those run in the
processes that list them in Config.Periodic (client.Run or RunDispatcher).`)
	var db dbFlags
	db.register(f)
	interval := f.Duration("interval", time.Second, "time between maintenance passes")
	retention := f.Duration("retention", 24*time.Hour, "how long finished jobs are kept")
	name := f.String("name", "", "process name shown in status (default host:pid)")
	level := f.String("log-level", "info", "log level: debug, info, warn or error")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if err := f.noArgs(pos); err != nil {
		return err
	}
	if err := db.validate(f); err != nil {
		return err
	}
	lvl, err := f.parseLevel(*level)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return f.fail("--interval must be positive, got %s", *interval)
	}
	if *retention <= 0 {
		return f.fail("--retention must be positive, got %s", *retention)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: lvl}))
	client, err := db.open(ctx, bq.Config{
		DispatchInterval: *interval,
		Retention:        *retention,
		Name:             *name,
		Logger:           logger,
	})
	if err != nil {
		return err
	}
	defer client.Close()
	return client.RunDispatcher(ctx)
}
