package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/humanize"
)

// The pgbench scripts, from the physlimit measurement (README.md).
var (
	//go:embed postgres/setup.sql
	setupSQL string
	//go:embed postgres/fill.sql
	fillSQL string
	//go:embed postgres/claim_complete.sql
	claimCompleteSQL string
)

// Jobs per transaction of the scripts.
const (
	fillPerTx  = 1000
	claimPerTx = 100
)

// runPostgres runs pgbench with fill.sql (enqueue) or claim_complete.sql
// (claim-complete, on jobs filled beforehand, untimed) on a fresh database.
func runPostgres(ctx context.Context, o options) (*result, error) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		return nil, errors.New("pgbench not found: install the PostgreSQL client programs (make bench's ensure step does, scripts/ensure-pgbench.sh)")
	}
	u, err := url.Parse(o.dsn)
	if err != nil {
		return nil, fmt.Errorf("parse --dsn %s", humanize.RedactDSN(o.dsn))
	}
	// pgx's pool settings mean nothing to libpq (pgbench).
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()

	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", humanize.RedactDSN(o.dsn), err)
	}
	defer admin.Close(context.Background())
	name := freshName()
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	defer func() {
		// FORCE: a pgbench killed midway may leave a session behind.
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: drop database %s: %v\n", name, err)
		}
	}()
	u.Path = "/" + name
	dsn := u.String()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", name, err)
	}
	defer conn.Close(context.Background())
	// No arguments: the simple protocol, which runs the script's several
	// statements in one go.
	if _, err := conn.Exec(ctx, setupSQL); err != nil {
		return nil, fmt.Errorf("setup.sql: %w", err)
	}

	dir, err := os.MkdirTemp("", "ceiling-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := func(file, text string) (string, error) {
		path := filepath.Join(dir, file)
		return path, os.WriteFile(path, []byte(text), 0o644)
	}
	fill, err := script("fill.sql", fillSQL)
	if err != nil {
		return nil, err
	}
	res := &result{Driver: "postgres"}
	if o.mode == "enqueue" {
		res.Jobs = orDefault(o.jobs, 200000)
		res.Batch, res.Clients = fillPerTx, o.enqueueConns
		run, err := runPgbench(ctx, pgbench, dsn, fill, o.enqueueConns, res.Jobs/fillPerTx)
		if err != nil {
			return nil, err
		}
		var n int64
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM ready").Scan(&n); err != nil {
			return nil, fmt.Errorf("count the enqueued jobs: %w", err)
		}
		res.TPS, res.EnqueuePerS = run.tps, float64(n)/run.elapsed().Seconds()
		return res, nil
	}

	res.Jobs = orDefault(o.jobs, 160000)
	res.Batch, res.Clients = claimPerTx, o.clients
	// A fifth more jobs than are claimed, so that every claim finds a
	// whole batch and the last ones do not time an empty queue.
	if _, err := runPgbench(ctx, pgbench, dsn, fill, o.enqueueConns, res.Jobs*6/5/fillPerTx+o.enqueueConns); err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	cc, err := script("claim_complete.sql", claimCompleteSQL)
	if err != nil {
		return nil, err
	}
	run, err := runPgbench(ctx, pgbench, dsn, cc, o.clients, res.Jobs/claimPerTx)
	if err != nil {
		return nil, err
	}
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL").Scan(&n); err != nil {
		return nil, fmt.Errorf("count the finished jobs: %w", err)
	}
	res.TPS, res.WorkPerS = run.tps, float64(n)/run.elapsed().Seconds()
	return res, nil
}

// pgbenchRun is what pgbench reported.
type pgbenchRun struct {
	tps float64
	txs int
}

// elapsed is the time pgbench's tps is over (connections left out).
func (r pgbenchRun) elapsed() time.Duration {
	return time.Duration(float64(r.txs) / r.tps * float64(time.Second))
}

var (
	tpsRe = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)
	txsRe = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)
)

// runPgbench runs script from clients connections, total transactions in
// all (rounded down to a multiple of clients), and reads its report.
func runPgbench(ctx context.Context, pgbench, dsn, script string, clients, total int) (pgbenchRun, error) {
	per := max(1, total/clients)
	cmd := exec.CommandContext(ctx, pgbench, "-n", "-f", script, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(clients, 2)),
		"-t", strconv.Itoa(per), dsn)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return pgbenchRun{}, fmt.Errorf("pgbench -f %s: %w: %s", filepath.Base(script), err, strings.TrimSpace(errOut.String()))
	}
	return parsePgbench(out.String())
}

// parsePgbench reads the transactions processed and the tps of a pgbench
// report.
func parsePgbench(out string) (pgbenchRun, error) {
	tm, xm := tpsRe.FindStringSubmatch(out), txsRe.FindStringSubmatch(out)
	if tm == nil || xm == nil {
		return pgbenchRun{}, fmt.Errorf("pgbench printed no tps or transaction count:\n%s", out)
	}
	tps, err := strconv.ParseFloat(tm[1], 64)
	if err != nil || tps <= 0 {
		return pgbenchRun{}, fmt.Errorf("pgbench tps %q", tm[1])
	}
	txs, err := strconv.Atoi(xm[1])
	if err != nil {
		return pgbenchRun{}, fmt.Errorf("pgbench transactions %q", xm[1])
	}
	return pgbenchRun{tps: tps, txs: txs}, nil
}
