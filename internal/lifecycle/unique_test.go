package lifecycle_test

import (
	"testing"

	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/driver/memstore"
)

// unique makes j unique by key, counting live jobs.
func unique(j *driver.NewJob, key string) *driver.NewJob {
	j.UniqueKey = key
	j.UniqueStates = []driver.JobState{driver.StateReady, driver.StateBlocked, driver.StateRunning}
	return j
}

func TestUniqueDuplicateIsNeitherAdmittedNorStored(t *testing.T) {
	s := memstore.New()
	first := enqueue(t, s, unique(job("k", 1, driver.Block, 0), "u"))
	v := enqueue(t, s, unique(job("k", 1, driver.Block, 0), "u"), unique(job("k", 1, driver.Block, 0), "u2"))
	if !v[0].Duplicate || v[0].DuplicateOf != 1 || v[0].State != driver.StateReady || first[0].State != driver.StateReady {
		t.Errorf("verdicts %+v after %+v: want the first a duplicate of ready job 1", v, first)
	}
	if v[1].State != driver.StateBlocked || v[1].Duplicate {
		t.Errorf("another unique key, same concurrency key: %+v, want blocked", v[1])
	}
	if n := len(s.Jobs); n != 2 {
		t.Errorf("%d jobs stored, want 2", n)
	}
	if sem := s.Semaphores["k"]; sem.Blocked != 1 || sem.Value != 0 {
		t.Errorf("semaphore %+v: want one holder and one blocked, the duplicate counted in neither", *sem)
	}
}

func TestUniqueSecondItemOfACallDuplicatesTheFirst(t *testing.T) {
	s := memstore.New()
	v := enqueue(t, s, unique(job("k", 5, driver.Block, 0), "u"), unique(job("k", 5, driver.Block, 0), "u"))
	if v[0].Duplicate || !v[1].Duplicate || v[1].DuplicateOf == 0 || v[1].State != driver.StateReady {
		t.Errorf("verdicts %+v: want the second a duplicate of the first, stored ready", v)
	}
	// A first item that admission discards leaves its duplicate discarded.
	s = memstore.New()
	enqueue(t, s, job("k", 1, driver.Discard, 0))
	v = enqueue(t, s, unique(job("k", 1, driver.Discard, 0), "d"), unique(job("k", 1, driver.Discard, 0), "d"))
	if v[0].State != driver.StateDiscarded || v[1].State != driver.StateDiscarded || v[1].Duplicate || v[1].HeldBy != 1 {
		t.Errorf("verdicts %+v: want both discarded, naming holder job 1", v)
	}
}

func TestDiscardNamesTheHolder(t *testing.T) {
	s := memstore.New()
	enqueue(t, s, job("k", 1, driver.Discard, 0))
	v := enqueue(t, s, job("k", 1, driver.Discard, 0))
	if v[0].State != driver.StateDiscarded || v[0].HeldBy != 1 {
		t.Errorf("verdict %+v: want discarded, held by job 1", v[0])
	}
}
