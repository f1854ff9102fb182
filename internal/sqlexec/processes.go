package sqlexec

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) ProcessRegister(ctx context.Context, p driver.Process) (int64, error) {
	at := s.c.Time(p.StartedAt)
	id, err := s.c.InsertID(ctx, s.q.RegisterProcess, p.Kind, p.Name, p.Hostname, p.PID, p.Queues,
		p.HeartbeatInterval.Milliseconds(), p.DeadAfter.Milliseconds(), at, at, at)
	if err != nil {
		return 0, fmt.Errorf("register process: %w", err)
	}
	return id, nil
}

// ProcessHeartbeat records the beat in a statement of its own, so the process
// row is locked only for that statement: a renewal waiting on semaphores
// never holds up a reaper's read of the row.
func (e *Executor) ProcessHeartbeat(ctx context.Context, b driver.Beat) (bool, error) {
	landed, err := e.beat(ctx, b)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return landed, nil
}

func (e *Executor) SemaphoreRenewHeld(ctx context.Context, processID int64, at time.Time, renewBelow float64) error {
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

func (e *Executor) ProcessDeleteDead(ctx context.Context, now time.Time, deadAfter time.Duration) (int, error) {
	n, err := e.d.ProcessDeleteDead(ctx, e, now, deadAfter)
	if err != nil {
		return 0, fmt.Errorf("delete dead processes: %w", err)
	}
	return n, nil
}

func (s Shared) ClaimListOfProcess(ctx context.Context, processID int64) ([]driver.OwnClaim, error) {
	out, err := collect(ctx, s.c, func(r Row) (c driver.OwnClaim, err error) {
		err = r.Scan(&c.JobID, &c.Fence, At(&c.ClaimedAt), &c.CancelRequested)
		return c, err
	}, s.q.ClaimsOfProcess, processID)
	if err != nil {
		return nil, fmt.Errorf("list claims of process %d: %w", processID, err)
	}
	return out, nil
}

func (s Shared) ProcessDeregister(ctx context.Context, processID int64) error {
	if _, err := s.c.Write(ctx, s.q.DeregisterProcess, processID); err != nil {
		return fmt.Errorf("deregister process %d: %w", processID, err)
	}
	return nil
}

func (s Shared) PassLook(ctx context.Context, now time.Time) (driver.PassWork, error) {
	var w driver.PassWork
	at := s.c.Time(now)
	rows, err := collect(ctx, s.c, func(r Row) (b driver.ProcessBeat, err error) {
		var id sql.NullInt64
		err = r.Scan(&w.ScheduledDue, &w.SemaphoresExpired, &w.SemaphoresPromotable, &w.DependenciesEnded,
			&id, At(&b.LastHeartbeatAt))
		b.ID = id.Int64 // 0: the row of no process
		return b, err
	}, s.q.PassLook, at, at)
	if err != nil {
		return driver.PassWork{}, fmt.Errorf("look for a dispatcher pass's work: %w", err)
	}
	for _, b := range rows {
		if b.ID != 0 {
			w.Beats = append(w.Beats, b)
		}
	}
	return w, nil
}

func (s Shared) ProcessList(ctx context.Context) ([]driver.Process, error) {
	out, err := collect(ctx, s.c, func(r Row) (p driver.Process, err error) {
		var hbMS, deadMS int64
		err = r.Scan(&p.ID, &p.Kind, &p.Name, &p.Hostname, &p.PID, &p.Queues, &hbMS, &deadMS,
			At(&p.StartedAt), At(&p.LastHeartbeatAt), At(&p.BeatingSince))
		p.HeartbeatInterval, p.DeadAfter = fromMillis(hbMS), fromMillis(deadMS)
		return p, err
	}, s.q.ListProcesses)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	return out, nil
}
