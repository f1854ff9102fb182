// Command goworker is the bq Go process the Python client's tests run
// beside them: it defines the job kinds the tests enqueue from Python and
// admits their inbox rows (bq.Client.RunWorkers), working only a queue no
// job uses, so admitted jobs stay ready or blocked for the tests to count.
// It prints "running" once started and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/bqueue/bq"
	_ "github.com/bqueue/bq/drivers/mysql"
	_ "github.com/bqueue/bq/drivers/postgres"
	_ "github.com/bqueue/bq/drivers/sqlite"
)

// ChargeArgs are the args Python sends as {"tenant": ..., "n": ...}.
type ChargeArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

func nothing(context.Context, ChargeArgs) error { return nil }

var (
	// charge: one at once per tenant, the excess discarded.
	charge = bq.Define("py.charge", nothing, bq.JobOptions[ChargeArgs]{
		Queue: "py",
		Concurrency: &bq.Concurrency[ChargeArgs]{
			Key: func(a ChargeArgs) string { return a.Tenant }, To: 1, OnConflict: bq.Discard,
		},
	})
	// perKey: the queue policy's MaxActivePerKey per tenant, the excess blocked.
	perKey = bq.Define("py.perkey", nothing, bq.JobOptions[ChargeArgs]{
		Queue:       "pyq",
		Concurrency: &bq.Concurrency[ChargeArgs]{Key: func(a ChargeArgs) string { return a.Tenant }},
	})
)

func main() {
	dsn := flag.String("dsn", "", "database DSN")
	prefix := flag.String("prefix", "bq_", "table prefix")
	flag.Parse()
	if err := run(*dsn, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "goworker:", err)
		os.Exit(1)
	}
}

func run(dsn, prefix string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := bq.Open(ctx, dsn, bq.Config{Prefix: prefix, Logger: log, NoGauges: true,
		Queues: map[string]int{"py-idle": 1}})
	if err != nil {
		return err
	}
	defer c.Close()
	for _, j := range []interface{ Err() error }{charge, perKey} {
		if err := j.Err(); err != nil {
			return err
		}
	}
	fmt.Println("running")
	return c.RunWorkers(ctx)
}
