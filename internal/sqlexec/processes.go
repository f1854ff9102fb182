package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (e *Executor) RegisterProcess(ctx context.Context, p driver.Process) (int64, error) {
	var id int64
	err := e.single(ctx, func(x *Executor) error { // one INSERT
		ids, err := x.insertRows(ctx, x.q.RegisterProcess, 10, []any{p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
			p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), Micros(p.StartedAt), Micros(p.StartedAt),
			Micros(p.StartedAt)}, true)
		if err == nil {
			id = ids[0]
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

// Heartbeat records the beat in a statement of its own, so the process
// row is locked only for that statement: a renewal waiting on semaphores
// never holds up a reaper's read of the row.
func (e *Executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	landed, err := e.beat(ctx, b)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return landed, nil
}

func (e *Executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	err := e.Atomic(ctx, func(x *Executor) error { return x.d.Renew(ctx, x, processID, at, renewBelow) })
	if err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

// beat records the beat in the process row; false when the row is gone.
func (e *Executor) beat(ctx context.Context, b driver.Beat) (bool, error) {
	n, err := e.exec(ctx, e.q.Heartbeat, Micros(b.At), Micros(b.BeatingSince), b.ProcessID)
	if err != nil || n > 0 {
		return n > 0, err
	}
	// MySQL counts changed rows: a beat at the same instant as the last
	// changes nothing, yet the process is there.
	var found bool
	err = e.db.QueryRowContext(ctx, e.q.ProcessExists, b.ProcessID).Scan(&found)
	return found, err
}

func (e *Executor) DeregisterProcess(ctx context.Context, processID int64) error {
	if _, err := e.exec(ctx, e.q.DeregisterProcess, processID); err != nil {
		return fmt.Errorf("deregister process %d: %w", processID, err)
	}
	return nil
}

func (e *Executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	n, err := e.d.DeleteDeadProcesses(ctx, e, now, deadAfter)
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return n, nil
}

func (e *Executor) ListProcesses(ctx context.Context) ([]driver.Process, error) {
	out, err := Collect(ctx, e.db, func(rows *sql.Rows) (p driver.Process, err error) {
		var hbMS, deadMS, started, last, since int64
		err = rows.Scan(&p.ID, &p.Kind, &p.Name, &p.Hostname, &p.PID, &p.Queues, &hbMS, &deadMS, &started, &last, &since)
		p.HeartbeatInterval, p.DeadAfter = fromMillis(hbMS), fromMillis(deadMS)
		p.StartedAt, p.LastHeartbeatAt, p.BeatingSince = FromMicros(started), FromMicros(last), FromMicros(since)
		return p, err
	}, e.q.ListProcesses)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
