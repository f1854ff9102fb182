package mysql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// portable is e taking the paths every server has, MySQL 8's, whatever
// the server.
func portable(e *engine) *engine {
	return newDriver(e.db, false, e.prefix, serverCaps{readCommitted: e.srv.readCommitted})
}

// TestInsertJobsStatementsPerChunk pins the cost of a batch of new jobs:
// one multi-row INSERT of jobs per chunk of maxRows (with RETURNING on
// MariaDB; on MySQL, which has none, a read of the session's increment
// beside it), one of their ready rows, not one INSERT per job. Every job
// gets its own row's id, in input order, whichever way the ids are read;
// the auto_increment_increment of a session that set it is honoured.
func TestInsertJobsStatementsPerChunk(t *testing.T) {
	ctx := context.Background()
	const n = 2*maxRows + maxRows/2
	chunks := (n + maxRows - 1) / maxRows
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, query string
		returning   bool
		perChunk    int
	}{
		{"returning", "", true, 2},
		{"last insert id", "", false, 3},
		{"last insert id, increment 3", "?auto_increment_increment=3&auto_increment_offset=2", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openEngine(t, tc.query)
			if e.srv.returning && !tc.returning {
				e = portable(e)
			} else if !e.srv.returning && tc.returning {
				t.Skip("the server has no INSERT ... RETURNING")
			}
			jobs := make([]*driver.NewJob, n)
			for i := range jobs {
				jobs[i] = &driver.NewJob{Kind: "k", Queue: "q", Args: fmt.Appendf(nil, `{"i":%d}`, i), MaxAttempts: 1,
					ScheduledAt: now, State: driver.StateReady}
			}
			stmts := counted(t, e, func(tx txExecutor) error { return tx.JobInsertMany(ctx, now, jobs) })
			if want := tc.perChunk * chunks; stmts != want {
				t.Errorf("%d jobs inserted in %d statements, want %d (%d per %d jobs)", n, stmts, want, tc.perChunk, maxRows)
			}
			seen := map[int64]bool{}
			for i, j := range jobs {
				info, ok, err := e.Exec().JobGet(ctx, j.ID)
				if err != nil || !ok {
					t.Fatalf("job %d: id %d not found: %v", i, j.ID, err)
				}
				if want := fmt.Sprintf(`{"i":%d}`, i); string(info.Args) != want || seen[j.ID] {
					t.Fatalf("job %d: id %d holds %s (seen before: %v), want %s", i, j.ID, info.Args, seen[j.ID], want)
				}
				seen[j.ID] = true
			}
		})
	}
}

// TestClaimStatements pins the cost of a claim: a locking read of the
// ready rows with their jobs, their delete, one INSERT of the claims
// (with RETURNING on MariaDB; on MySQL a read of the session's increment
// beside it). Each claim carries its own row's fence.
func TestClaimStatements(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, returning := range []bool{true, false} {
		e := openEngine(t, "")
		if e.srv.returning && !returning {
			e = portable(e)
		} else if !e.srv.returning && returning {
			continue
		}
		jobs := make([]*driver.NewJob, 50)
		for i := range jobs {
			jobs[i] = &driver.NewJob{Kind: "k", Queue: "q", Args: fmt.Appendf(nil, `{"i":%d}`, i), MaxAttempts: 1,
				Priority: i % 3, ScheduledAt: now, State: driver.StateReady}
		}
		if err := driver.InTx(ctx, e, func(ex driver.Executor) error { return ex.JobInsertMany(ctx, now, jobs) }); err != nil {
			t.Fatal(err)
		}
		var claims []*driver.Claim
		stmts := counted(t, e, func(tx txExecutor) (err error) {
			claims, err = tx.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 40, ProcessID: 7, Now: now})
			return err
		})
		want := 3
		if !returning {
			want = 4
		}
		if len(claims) != 40 || stmts != want {
			t.Errorf("returning %v: claimed %d of 40 in %d statements, want %d", returning, len(claims), stmts, want)
		}
		own, err := e.Exec().ClaimListOfProcess(ctx, 7)
		if err != nil {
			t.Fatal(err)
		}
		fences := map[int64]int64{}
		for _, c := range own {
			fences[c.JobID] = c.Fence
		}
		for i, c := range claims {
			if i > 0 && (c.Priority > claims[i-1].Priority || c.Priority == claims[i-1].Priority && c.ID < claims[i-1].ID) {
				t.Errorf("claim %d (job %d, priority %d) out of the line's order", i, c.ID, c.Priority)
			}
			if f, ok := fences[c.ID]; !ok || f != c.Fence || !c.ClaimedAt.Equal(now) || string(c.Args) != fmt.Sprintf(`{"i":%d}`, c.ID-jobs[0].ID) {
				t.Errorf("claim of job %d: fence %d (stored %d), claimed at %s, args %s", c.ID, c.Fence, f, c.ClaimedAt, c.Args)
			}
		}
	}
}
