package main

// What a fleet run asks of the database server and counts there: whether
// it has the connections the processes need, the peak of those they
// hold, and the wake-ups sent to them.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/pgstats"
	"github.com/bqueue/bq/migrations"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// checkConnections fails before any process starts when the fleet could
// not get its connections from the server, and returns the connections
// one process may open.
func (fl *fleet) checkConnections(ctx context.Context) (int, error) {
	var limit, used, perProcess int
	var what string
	switch fl.b.driverName() {
	case "postgres":
		pc, err := pgxpool.ParseConfig(fl.workerDSN())
		if err != nil {
			return 0, err
		}
		perProcess = int(pc.MaxConns) + 1 // the listener's is taken out of the pool
		what = fmt.Sprintf("pool %d (pool_max_conns) + listener 1", pc.MaxConns)
		if err := fl.db.admin.QueryRow(ctx,
			`SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int,
			        (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')`).Scan(&limit, &used); err != nil {
			return 0, fmt.Errorf("bench: read max_connections: %w", err)
		}
	case "mysql":
		// The listener reads the signal log on the pool; without --pool
		// the pool is unbounded and keeps up to 16 idle.
		perProcess, what = 16+1, "idle pool 16 (the pool itself is unbounded; bound it with --pool) + listener 1"
		if fl.b.o.pool > 0 {
			perProcess, what = fl.b.o.pool, "--pool, the listener's reads included"
		}
		err := fl.mysql(ctx, func(db *sql.DB) error {
			return db.QueryRowContext(ctx, "SELECT @@max_connections, (SELECT count(*) FROM information_schema.processlist)").Scan(&limit, &used)
		})
		if err != nil {
			return 0, fmt.Errorf("bench: read max_connections: %w", err)
		}
	default:
		return 1, nil // one file; every process opens its own connection
	}
	need := fl.b.o.processes * perProcess
	if need > limit-used {
		return 0, fmt.Errorf("bench: --processes %d needs up to %d connections (%d each: %s) but the server allows %d and %d are in use: lower --processes, raise max_connections on the server, or put fewer connections in each pool (docs/scaling.md)",
			fl.b.o.processes, need, perProcess, what, limit, used)
	}
	return perProcess, nil
}

// mysql runs f on a connection to the run's database, closed afterwards.
func (fl *fleet) mysql(ctx context.Context, f func(*sql.DB) error) error {
	db, _, err := openMySQLAdmin(fl.db.directDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	return f(db)
}

// sampleConnections counts the run's server connections every 100 ms
// until the returned function is called, which returns the peak.
func (fl *fleet) sampleConnections(ctx context.Context) (peak func() int) {
	var count func(context.Context) (int, error)
	switch fl.b.driverName() {
	case "postgres":
		count = func(ctx context.Context) (n int, err error) {
			err = fl.db.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`,
				pgstats.AppName(fl.db.schema)).Scan(&n)
			return n, err
		}
	case "mysql":
		admin, name, err := openMySQLAdmin(fl.db.directDSN)
		if err != nil {
			return func() int { return 0 }
		}
		count = func(ctx context.Context) (n int, err error) {
			err = admin.QueryRowContext(ctx, "SELECT count(*) - 1 FROM information_schema.processlist WHERE db = ?", name).Scan(&n)
			return n, err
		}
		defer func() {
			inner := peak
			peak = func() int { n := inner(); admin.Close(); return n }
		}()
	default:
		return func() int { return 0 }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		most := 0
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if n, err := count(ctx); err == nil {
				most = max(most, n)
			}
			select {
			case <-ctx.Done():
				done <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		cancel()
		return <-done
	}
}

// countWakeups starts counting the wake-ups sent to the fleet and returns
// the function that stops and returns the count: on PostgreSQL a LISTEN
// of the parent's own on the ready channel (database-wide, so another bq
// on the same database adds to it), on MySQL the signal log's
// AUTO_INCREMENT before and after.
func (fl *fleet) countWakeups(ctx context.Context) (func() (int, error), error) {
	switch fl.b.driverName() {
	case "postgres":
		conn, err := pgx.Connect(ctx, fl.db.directDSN)
		if err != nil {
			return nil, fmt.Errorf("bench: count notifications: %w", err)
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{migrations.DefaultPrefix + "ready"}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("bench: count notifications: %w", err)
		}
		lctx, cancel := context.WithCancel(ctx)
		done := make(chan int)
		go func() {
			n := 0
			for {
				note, err := conn.WaitForNotification(lctx)
				if err != nil {
					done <- n
					return
				}
				// The queue, then a space and the sender's origin.
				if queue, _, _ := strings.Cut(note.Payload, " "); queue == benchQueue {
					n++
				}
			}
		}()
		return func() (int, error) {
			time.Sleep(50 * time.Millisecond) // the last notifications in flight
			cancel()
			n := <-done
			conn.Close(context.WithoutCancel(ctx))
			return n, nil
		}, nil
	case "mysql":
		before, err := fl.signalLogNext(ctx)
		if err != nil {
			return nil, err
		}
		return func() (int, error) {
			after, err := fl.signalLogNext(ctx)
			return int(after - before), err
		}, nil
	}
	return func() (int, error) { return 0, nil }, nil
}

// signalLogNext is the signal log's next id.
func (fl *fleet) signalLogNext(ctx context.Context) (int64, error) {
	var next sql.NullInt64
	err := fl.mysql(ctx, func(db *sql.DB) error {
		// MySQL 8 caches the statistics of information_schema.tables;
		// MariaDB has no such variable and reads them live.
		_, _ = db.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0")
		return db.QueryRowContext(ctx, `SELECT auto_increment FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name = ?`, migrations.DefaultPrefix+"signal_log").Scan(&next)
	})
	if err != nil {
		return 0, fmt.Errorf("bench: read the signal log's next id: %w", err)
	}
	return next.Int64, nil
}
