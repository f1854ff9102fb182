package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq/internal/driver"
)

func (e *executor) RegisterProcess(ctx context.Context, p driver.Process) (int64, error) {
	var id int64
	err := e.db.QueryRow(ctx, e.q.registerProcess, p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
		p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), p.StartedAt).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

func (e *executor) Heartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	tag, err := e.db.Exec(ctx, e.q.heartbeat, b.ProcessID, b.At, b.BeatingSince)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

func (e *executor) RenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
	if _, err := e.db.Exec(ctx, e.q.renewSems, processID, at, renewBelow); err != nil {
		return fmt.Errorf("renew semaphores: %w", err)
	}
	return nil
}

func (e *executor) ClaimsOfProcess(ctx context.Context, processID int64) ([]driver.OwnClaim, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (c driver.OwnClaim, err error) {
		err = r.Scan(&c.JobID, &c.Fence, &c.ClaimedAt, &c.CancelRequested)
		return c, err
	}, e.q.claimsOfProcess, processID)
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	return out, nil
}

func (e *executor) DeregisterProcess(ctx context.Context, processID int64) error {
	if _, err := e.db.Exec(ctx, e.q.deregisterProcess, processID); err != nil {
		return fmt.Errorf("deregister process %d: %w", processID, err)
	}
	return nil
}

func (e *executor) DeleteDeadProcesses(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	tag, err := e.db.Exec(ctx, e.q.deleteDeadProcesses, now, deadAfter.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (e *executor) ListProcesses(ctx context.Context) ([]driver.Process, error) {
	out, err := collect(ctx, e.db, func(r pgx.CollectableRow) (p driver.Process, err error) {
		var hbMS, deadMS int64
		err = r.Scan(&p.ID, &p.Kind, &p.Name, &p.Hostname, &p.PID, &p.Queues, &hbMS, &deadMS,
			&p.StartedAt, &p.LastHeartbeatAt, &p.BeatingSince)
		p.HeartbeatInterval = time.Duration(hbMS) * time.Millisecond
		p.DeadAfter = time.Duration(deadMS) * time.Millisecond
		return p, err
	}, e.q.listProcesses)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
