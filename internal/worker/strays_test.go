package worker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// straysStore is a driver over a memstore whose transactions commit at
// once, for the claim check's return of strays.
type straysStore struct {
	driver.Driver
	s *memstore.Store
}

type straysExec struct {
	driver.Executor
	s *memstore.Store
}

func (e straysExec) JobGet(ctx context.Context, id int64) (*driver.JobInfo, bool, error) {
	return e.s.JobGet(ctx, id)
}
func (e straysExec) ClaimCancelRequested(ctx context.Context, id, fence int64) (bool, error) {
	return e.s.ClaimCancelRequested(ctx, id, fence)
}
func (e straysExec) ClaimDelete(ctx context.Context, id, fence int64) (bool, error) {
	return e.s.ClaimDelete(ctx, id, fence)
}
func (e straysExec) ExecutionInsertMany(ctx context.Context, st driver.JobState, rows []driver.Execution) error {
	return e.s.ExecutionInsertMany(ctx, st, rows)
}

type straysTx struct{ straysExec }

func (straysTx) Commit(context.Context) error   { return nil }
func (straysTx) Rollback(context.Context) error { return nil }

func (d straysStore) Exec() driver.Executor { return straysExec{s: d.s} }
func (d straysStore) Begin(context.Context) (driver.Tx, error) {
	return straysTx{straysExec{s: d.s}}, nil
}

// TestStrayReturnLogsWhatHappened: the claim check returns a claim no run
// holds to ready and says so; a claim that ended between the check's read
// and its return (its run's completion committed meanwhile) was not
// returned, and no line says it was.
func TestStrayReturnLogsWhatHappened(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	s := memstore.New()
	var jobs []*driver.NewJob
	for range 2 {
		jobs = append(jobs, &driver.NewJob{Kind: "k", Queue: "q", MaxAttempts: 3, ScheduledAt: now, State: driver.StateReady})
	}
	if err := s.JobInsertMany(ctx, now, jobs); err != nil {
		t.Fatal(err)
	}
	claims, err := s.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 2, ProcessID: 7, Now: now})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %d claims, %v", len(claims), err)
	}
	var buf bytes.Buffer
	c := &Runtime{drv: straysStore{s: s}, cfg: Config{Now: func() time.Time { return now }},
		log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	p := &process{c: c, id: 7}
	own := func(cl *driver.Claim) driver.OwnClaim {
		return driver.OwnClaim{JobID: cl.ID, Fence: cl.Fence, ClaimedAt: now}
	}

	// The second claim's run completed after the check read the claims.
	if _, err := lifecycle.Complete(ctx, s, claims[1], true, now); err != nil {
		t.Fatal(err)
	}
	p.returnStray(ctx, 7, own(claims[0]))
	p.returnStray(ctx, 7, own(claims[1]))

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "returned to ready") {
		t.Errorf("the returned stray's line: %s", lines[0])
	}
	if strings.Contains(lines[1], "returned to ready") || !strings.Contains(lines[1], "level=DEBUG") ||
		!strings.Contains(lines[1], "ended before it was returned") {
		t.Errorf("the claim that ended first: %s", lines[1])
	}
	if r := s.Jobs[claims[0].ID]; r.State != driver.StateReady {
		t.Errorf("the stray is %s, want ready", r.State)
	}
	if r := s.Jobs[claims[1].ID]; r.State != driver.StateCompleted {
		t.Errorf("the completed job is %s, want completed", r.State)
	}
}
