package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	bqmysql "github.com/bqueue/bq/drivers/mysql"
	"github.com/bqueue/bq/internal/humanize"
)

// The physlimit tables on MySQL/MariaDB: foreign keys as in bq, and a poll
// index in the claim's order (with ASC priority the locking read sorts the
// whole table and the ceiling falls five-fold; README.md).
var mysqlSchema = []string{
	"CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(64) NOT NULL, args LONGTEXT NOT NULL, " +
		"priority INT NOT NULL DEFAULT 0, created_at DATETIME(6) NOT NULL, finished_at DATETIME(6) NULL) ENGINE=InnoDB",
	"CREATE TABLE ready (job_id BIGINT PRIMARY KEY, queue VARCHAR(64) NOT NULL, priority INT NOT NULL, " +
		"KEY q (queue, priority DESC, job_id), FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE) ENGINE=InnoDB",
	"CREATE TABLE claimed (job_id BIGINT PRIMARY KEY, process_id BIGINT NOT NULL, fence BIGINT NOT NULL, KEY p (process_id), " +
		"FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE) ENGINE=InnoDB",
}

// mysqlFillRows is the rows of one enqueue INSERT.
const mysqlFillRows = 1000

// runMySQL fills jobs+ready in 1,000-row INSERTs (enqueue), or fills them
// untimed and moves them ready -> claimed -> finished in batches of
// --batch, one transaction a step, from --clients connections
// (claim-complete), on a fresh database at READ COMMITTED.
func runMySQL(ctx context.Context, o options) (*result, error) {
	cfg, err := bqmysql.ParseURL(o.dsn)
	if err != nil {
		return nil, err
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", humanize.RedactDSN(o.dsn), err)
	}
	defer admin.Close()
	var version string
	if err := admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", humanize.RedactDSN(o.dsn), err)
	}
	name := freshName() // [0-9a-f_] only: safe unquoted
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	defer func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			fmt.Fprintf(os.Stderr, "ceiling: drop database %s: %v\n", name, err)
		}
	}()
	run := cfg.Clone()
	run.DBName = name
	if run.Params == nil {
		run.Params = map[string]string{}
	}
	// MariaDB before 11.1 knows only tx_isolation; MySQL 8 only
	// transaction_isolation.
	iso := "transaction_isolation"
	if strings.Contains(version, "MariaDB") {
		iso = "tx_isolation"
	}
	run.Params[iso] = "'READ-COMMITTED'"
	db, err := sql.Open("mysql", run.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", name, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(max(o.clients, o.enqueueConns) + 1)
	db.SetMaxIdleConns(max(o.clients, o.enqueueConns) + 1)
	for _, s := range mysqlSchema {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("create the tables: %w", err)
		}
	}

	res := &result{Driver: "mysql"}
	if o.mode == "enqueue" {
		res.Jobs = orDefault(o.jobs, 100000)
		res.Batch, res.Clients = mysqlFillRows, o.enqueueConns
		took, err := mysqlFill(ctx, db, res.Jobs, o.enqueueConns)
		if err != nil {
			return nil, err
		}
		res.EnqueuePerS = float64(res.Jobs) / took.Seconds()
		return res, nil
	}
	res.Jobs = orDefault(o.jobs, 40000)
	res.Batch, res.Clients = o.batch, o.clients
	if _, err := mysqlFill(ctx, db, res.Jobs, o.enqueueConns); err != nil {
		return nil, err
	}
	done, took, err := mysqlClaimComplete(ctx, db, o.batch, o.clients)
	if err != nil {
		return nil, err
	}
	if done != int64(res.Jobs) {
		return nil, fmt.Errorf("claim-complete finished %d jobs of %d", done, res.Jobs)
	}
	res.WorkPerS, res.Deadlocks = float64(done)/took.Seconds(), deadlocks.Load()
	return res, nil
}

// mysqlFill enqueues jobs (rounded up to whole INSERTs) from conns
// connections, each INSERT of jobs followed by one of their ready rows in
// one transaction.
func mysqlFill(ctx context.Context, db *sql.DB, jobs, conns int) (time.Duration, error) {
	row := "('default','{}',0,NOW(6))"
	insert := "INSERT INTO jobs (queue, args, priority, created_at) VALUES " + strings.Repeat(row+",", mysqlFillRows-1) + row
	var left atomic.Int64
	left.Store(int64((jobs + mysqlFillRows - 1) / mysqlFillRows))
	one := func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		r, err := tx.ExecContext(ctx, insert)
		if err != nil {
			return err
		}
		// One multi-row INSERT takes consecutive ids (innodb_autoinc_lock_mode
		// 1 or 2 with a simple insert): LastInsertId is the first.
		first, err := r.LastInsertId()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO ready (job_id, queue, priority) SELECT id, queue, priority FROM jobs WHERE id BETWEEN ? AND ?",
			first, first+mysqlFillRows-1); err != nil {
			return err
		}
		return tx.Commit()
	}
	t0 := time.Now()
	err := parallel(conns, func() error {
		for left.Add(-1) >= 0 {
			if err := one(); err != nil {
				return fmt.Errorf("enqueue: %w", err)
			}
		}
		return nil
	})
	return time.Since(t0), err
}

// mysqlClaimComplete drains the ready rows from clients connections: a
// claim (locking read with SKIP LOCKED, delete, insert) then a completion
// (delete the claims, finish the jobs), each one transaction.
func mysqlClaimComplete(ctx context.Context, db *sql.DB, batch, clients int) (int64, time.Duration, error) {
	var done atomic.Int64
	in := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?,", n), ",") + ")" }
	// claim moves up to batch ready rows to claimed and returns their ids.
	claim := func(pid int) ([]any, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, "SELECT job_id FROM ready WHERE queue = 'default' ORDER BY priority DESC, job_id LIMIT ? FOR UPDATE SKIP LOCKED", batch)
		if err != nil {
			return nil, err
		}
		var ids []any
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, nil
		}
		list := in(len(ids))
		if _, err := tx.ExecContext(ctx, "DELETE FROM ready WHERE job_id IN "+list, ids...); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO claimed (job_id, process_id, fence) SELECT id, ?, 1 FROM jobs WHERE id IN "+list,
			append([]any{pid}, ids...)...); err != nil {
			return nil, err
		}
		return ids, tx.Commit()
	}
	// complete deletes the claims of ids and finishes their jobs.
	complete := func(ids []any) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		list := in(len(ids))
		if _, err := tx.ExecContext(ctx, "DELETE FROM claimed WHERE job_id IN "+list, ids...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE jobs SET finished_at = NOW(6) WHERE id IN "+list, ids...); err != nil {
			return err
		}
		return tx.Commit()
	}
	var pids atomic.Int64
	t0 := time.Now()
	err := parallel(clients, func() error {
		pid := int(pids.Add(1))
		for {
			ids, err := retryDeadlock(func() (ids []any, err error) { return claim(pid) })
			if err != nil {
				return fmt.Errorf("claim: %w", err)
			}
			if len(ids) == 0 {
				return nil
			}
			if _, err := retryDeadlock(func() ([]any, error) { return nil, complete(ids) }); err != nil {
				return fmt.Errorf("complete: %w", err)
			}
			done.Add(int64(len(ids)))
		}
	})
	return done.Load(), time.Since(t0), err
}

// retryDeadlock runs f again while InnoDB picks it as a deadlock's victim
// (small batches meet in the foreign keys' locks on jobs); the victim's
// transaction was rolled back whole, so running it again is safe.
func retryDeadlock(f func() ([]any, error)) ([]any, error) {
	for {
		ids, err := f()
		var me *gomysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			deadlocks.Add(1)
			continue
		}
		return ids, err
	}
}

// deadlocks counts the transactions retried.
var deadlocks atomic.Int64

// parallel runs f on n goroutines and returns the first error.
func parallel(n int, f func() error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if err := f(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
