// Command ceiling measures the database's own ceiling for bq's design, with
// no queue process in between: the least work a job costs in a
// table-per-state queue (a job row and a ready row at enqueue; ready ->
// claimed -> finished in batches). bench/matrix runs it in the same rounds
// as bq and River, so that each of their throughputs can be shown as a
// fraction of what the database alone reached beside it.
//
//	ceiling --dsn postgres://... --mode enqueue|claim-complete   (pgbench, postgres/*.sql)
//	ceiling --dsn mysql://...    --mode enqueue|claim-complete [--batch 100]
//
// Each run makes a fresh database ceiling_<random> and drops it afterwards.
// It prints one JSON line in the shape of `bq bench --json`: enqueue_per_s
// for enqueue, work_per_s for claim-complete.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/bqueue/bq/internal/humanize"
)

// result is the JSON line printed, the fields bench/matrix reads named as
// in `bq bench --json`.
type result struct {
	System      string  `json:"system"`
	Mode        string  `json:"mode"`
	Driver      string  `json:"driver"`
	Config      string  `json:"config"`
	Jobs        int     `json:"jobs"`
	Batch       int     `json:"batch"`
	Clients     int     `json:"clients"`
	TPS         float64 `json:"tps,omitempty"`
	EnqueuePerS float64 `json:"enqueue_per_s,omitempty"`
	WorkPerS    float64 `json:"work_per_s,omitempty"`
	// Deadlocks is the MySQL transactions InnoDB rolled back as a
	// deadlock's victim and the run retried.
	Deadlocks int64 `json:"deadlocks,omitempty"`
}

type options struct {
	dsn, mode    string
	jobs, batch  int
	clients      int
	enqueueConns int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "ceiling: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var o options
	flag.StringVar(&o.dsn, "dsn", "", "the server: postgres://... or mysql://... (a fresh database is made on it)")
	flag.StringVar(&o.mode, "mode", "claim-complete", "enqueue or claim-complete")
	flag.IntVar(&o.jobs, "jobs", 0, "jobs timed (default: enqueue 200,000 on PostgreSQL and 100,000 on MySQL; claim-complete 160,000 and 40,000)")
	flag.IntVar(&o.batch, "batch", 100, "MySQL claim-complete: jobs per claim and per completion (PostgreSQL's scripts claim 100)")
	flag.IntVar(&o.clients, "clients", 4, "claim-complete: connections claiming and completing at once")
	flag.IntVar(&o.enqueueConns, "enqueue-clients", 2, "connections enqueueing at once")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if o.mode != "enqueue" && o.mode != "claim-complete" {
		return fmt.Errorf("--mode %q: use enqueue or claim-complete", o.mode)
	}
	if o.batch < 1 || o.clients < 1 || o.enqueueConns < 1 || o.jobs < 0 {
		return errors.New("--batch, --clients and --enqueue-clients must be at least 1, --jobs not negative")
	}
	var (
		res *result
		err error
	)
	switch {
	case strings.HasPrefix(o.dsn, "postgres"):
		res, err = runPostgres(ctx, o)
	case strings.HasPrefix(o.dsn, "mysql"):
		res, err = runMySQL(ctx, o)
	default:
		return fmt.Errorf("--dsn %q: use postgres://... or mysql://... (no ceiling is measured for SQLite)", humanize.RedactDSN(o.dsn))
	}
	if err != nil {
		return err
	}
	res.System, res.Mode, res.Config = "ceiling", o.mode, "physlimit"
	return json.NewEncoder(os.Stdout).Encode(res)
}

// freshName is the name of a run's database, unique so that runs beside
// each other do not meet.
func freshName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "ceiling_" + hex.EncodeToString(b)
}

// orDefault is v, or def when v is 0 (not given).
func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
