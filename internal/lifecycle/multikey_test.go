package lifecycle_test

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
	"github.com/bqueue/bq/internal/lifecycle"
)

// multi is a job holding every key given, each with a limit of 1.
func multi(keys ...string) *driver.NewJob {
	j := job(keys[0], 1, driver.Block, 0)
	for _, k := range keys[1:] {
		j.More = append(j.More, driver.Limit{Key: k, To: 1, Duration: time.Minute})
	}
	return j
}

func add(t *testing.T, s *memstore.Store, jobs ...*driver.NewJob) []lifecycle.Verdict {
	t.Helper()
	v, _, err := lifecycle.Admit(ctx, s, jobs, now)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func honestAll(t *testing.T, s *memstore.Store, keys ...string) {
	t.Helper()
	for _, k := range keys {
		honest(t, s, k)
	}
}

func claimID(t *testing.T, s *memstore.Store, id int64) *driver.Claim {
	t.Helper()
	cs, err := s.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 100, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var out *driver.Claim
	for _, c := range cs {
		if c.ID == id {
			out = c
		} else if _, err := lifecycle.Unclaim(ctx, s, c, now); err != nil {
			t.Fatal(err)
		}
	}
	if out == nil {
		t.Fatalf("job %d is not ready", id)
	}
	return out
}

func complete(t *testing.T, s *memstore.Store, c *driver.Claim) lifecycle.Result {
	t.Helper()
	r, err := lifecycle.Complete(ctx, s, c, true, now)
	if err != nil || !r.Matched {
		t.Fatalf("complete %d: %+v %v", c.ID, r, err)
	}
	return r
}

// A job needing a and b, with a held, waits holding nothing: a job of b
// alone still runs (no hold-and-wait).
func TestMultiKeyWaitsHoldingNothing(t *testing.T) {
	s := memstore.New()
	v := add(t, s, job("a", 1, driver.Block, 0))
	v = append(v, add(t, s, multi("a", "b"))...)
	v = append(v, add(t, s, job("b", 1, driver.Block, 0))...)
	if got := states(v); got != "ready,blocked,ready" {
		t.Fatalf("states %s, want ready,blocked,ready", got)
	}
	honestAll(t, s, "a", "b")
	if sem := s.Semaphores["a"]; sem.Multi != 1 || sem.Blocked != 1 {
		t.Fatalf("a: %+v, want the multi-key job counted in its line", *sem)
	}
}

// As a frees while b is full, the multi-key job moves to b's line; it
// runs once both are free, taking both slots at once.
func TestMultiKeyMovesToTheFullKeysLine(t *testing.T) {
	s := memstore.New()
	add(t, s, job("a", 1, driver.Block, 0)) // 1
	add(t, s, multi("a", "b"))              // 2, waits in a's line
	add(t, s, job("b", 1, driver.Block, 0)) // 3, takes b
	add(t, s, job("a", 1, driver.Block, 0)) // 4, waits in a's line behind 2
	r := complete(t, s, claimID(t, s, 1))   // a frees: 2 moves to b's line, 4 takes a
	if r.Promoted.Jobs != 1 || r.Promoted.JobIDs[0] != 4 {
		t.Fatalf("promoted %+v, want job 4 (2 cannot have b)", r.Promoted)
	}
	if x := s.Jobs[2]; x.State != driver.StateBlocked || x.Line != "b" {
		t.Fatalf("job 2: %s in line %q, want blocked in b's line", x.State, x.Line)
	}
	honestAll(t, s, "a", "b")
	complete(t, s, claimID(t, s, 3)) // b frees, a is held by 4: 2 moves back to a's line
	if x := s.Jobs[2]; x.State != driver.StateBlocked || x.Line != "" {
		t.Fatalf("job 2: %s in line %q, want blocked in a's line", x.State, x.Line)
	}
	honestAll(t, s, "a", "b")
	r = complete(t, s, claimID(t, s, 4)) // a frees, b is free: 2 takes both
	if r.Promoted.Jobs != 1 || r.Promoted.JobIDs[0] != 2 {
		t.Fatalf("promoted %+v, want job 2", r.Promoted)
	}
	honestAll(t, s, "a", "b")
	if s.Semaphores["a"].Value != 0 || s.Semaphores["b"].Value != 0 {
		t.Fatalf("a %+v b %+v: want both held by job 2", *s.Semaphores["a"], *s.Semaphores["b"])
	}
	complete(t, s, claimID(t, s, 2))
	honestAll(t, s, "a", "b")
	if s.Semaphores["a"].Value != 1 || s.Semaphores["b"].Value != 1 {
		t.Fatal("job 2's end did not free both keys")
	}
}

// A new job never overtakes a multi-key job waiting in its key's line,
// even when that key has a free slot.
func TestMultiKeyIsNotOvertaken(t *testing.T) {
	s := memstore.New()
	add(t, s, job("b", 1, driver.Block, 0)) // 1 holds b
	add(t, s, multi("a", "b"))              // 2 waits in b's line (a is free)
	v := add(t, s, multi("b", "c"))         // 3: b's line is not empty
	if v[0].State != driver.StateBlocked {
		t.Fatalf("job 3 %s, want blocked behind job 2", v[0].State)
	}
	r := complete(t, s, claimID(t, s, 1))
	if r.Promoted.Jobs != 1 || r.Promoted.JobIDs[0] != 2 {
		t.Fatalf("promoted %+v, want job 2 first", r.Promoted)
	}
	honestAll(t, s, "a", "b", "c")
}

// CompleteMany releases every key of a multi-key claim once.
func TestMultiKeyCompleteManyReleasesEveryKey(t *testing.T) {
	s := memstore.New()
	add(t, s, multi("a", "b", "c"), job("d", 1, driver.Block, 0))
	cs, err := s.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 10, Now: now})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claims %v %v", cs, err)
	}
	if _, err := lifecycle.CompleteMany(ctx, s, cs, true, false, now); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		honest(t, s, k)
		if s.Semaphores[k].Value != 1 {
			t.Errorf("%s not released: %+v", k, *s.Semaphores[k])
		}
	}
}

// A multi-key job discards when a full key of its says Discard.
func TestMultiKeyDiscardsOnItsFullKey(t *testing.T) {
	s := memstore.New()
	add(t, s, job("b", 1, driver.Block, 0))
	j := multi("a", "b")
	j.More[0].OnConflict = driver.Discard
	v := add(t, s, j)
	if v[0].State != driver.StateDiscarded || v[0].Reason == "" {
		t.Fatalf("verdict %+v, want discarded naming b", v[0])
	}
	honestAll(t, s, "a", "b")
	if s.Semaphores["a"].Value != 1 {
		t.Fatal("a discarded job kept a's slot")
	}
}

// Cancelling a waiting multi-key job takes it out of the line it is in.
func TestMultiKeyCancelLeavesItsLine(t *testing.T) {
	s := memstore.New()
	add(t, s, job("b", 1, driver.Block, 0))
	add(t, s, multi("a", "b"))
	if _, err := lifecycle.Cancel(ctx, s, 2, now); err != nil {
		t.Fatal(err)
	}
	honestAll(t, s, "a", "b")
}

// CompleteMany promotes the lines of many keys holding multi-key jobs in
// one pass: each head takes its other key's slot while one is free, and
// moves to that key's line once it is full.
func TestMultiKeyCompleteManyPromotesManyLines(t *testing.T) {
	s := memstore.New()
	shared := func(j *driver.NewJob) *driver.NewJob {
		j.More = []driver.Limit{{Key: "s", To: 2, Duration: time.Minute}}
		return j
	}
	for _, k := range []string{"a1", "a2", "a3"} {
		add(t, s, job(k, 1, driver.Block, 0))
	}
	add(t, s, shared(job("a1", 1, driver.Block, 0)), shared(job("a2", 1, driver.Block, 0)), shared(job("a3", 1, driver.Block, 0)))
	// Jobs 1-3 hold a1-a3; 4-6 wait in their lines, each needing s too.
	cs, err := s.ReadyClaim(ctx, driver.ClaimParams{Queue: "q", Max: 10, Now: now})
	if err != nil || len(cs) != 3 {
		t.Fatalf("claims %v %v", cs, err)
	}
	rs, err := lifecycle.CompleteMany(ctx, s, cs, true, false, now)
	if err != nil {
		t.Fatal(err)
	}
	var promoted []int64
	for _, r := range rs {
		promoted = append(promoted, r.Promoted.JobIDs...)
	}
	if len(promoted) != 2 {
		t.Fatalf("promoted %v, want two jobs (s allows 2)", promoted)
	}
	honestAll(t, s, "a1", "a2", "a3", "s")
	if x := s.Jobs[6]; x.State != driver.StateBlocked || x.Line != "s" {
		t.Fatalf("job 6: %s in line %q, want blocked in s's line", x.State, x.Line)
	}
}
