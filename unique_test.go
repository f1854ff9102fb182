package bq

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// TestUniqueKeyParts: each field of Unique, and only it, changes the key.
func TestUniqueKeyParts(t *testing.T) {
	at := time.Date(2026, 3, 4, 10, 20, 0, 0, time.UTC)
	args := []byte(`{"a":1}`)
	all := Unique{ByArgs: true, ByQueue: true, ByPeriod: time.Hour}
	base := all.key("k", "q", args, at)
	for name, other := range map[string]string{
		"kind":   all.key("k2", "q", args, at),
		"queue":  all.key("k", "q2", args, at),
		"args":   all.key("k", "q", []byte(`{"a":2}`), at),
		"period": all.key("k", "q", args, at.Add(time.Hour)),
	} {
		if other == base {
			t.Errorf("another %s, same key %s", name, base)
		}
	}
	if same := all.key("k", "q", args, at.Add(39*time.Minute)); same != base {
		t.Error("the same hour (10:20 and 10:59) gave two keys")
	}
	// A zone is only another spelling of the instant.
	if same := all.key("k", "q", args, at.In(time.FixedZone("x", 5*3600+1800))); same != base {
		t.Error("the same instant in another zone gave another key")
	}
	byKind := Unique{ByStates: []JobState{StateReady}}
	if byKind.key("k", "q", args, at) != byKind.key("k", "q2", []byte(`{}`), at.Add(48*time.Hour)) {
		t.Error("ByStates alone: the key is the kind's, whatever the queue, args and time")
	}
	if len(base) != 64 {
		t.Errorf("key %q: want 64 hex digits (SHA-256)", base)
	}
}

// TestPlainEnqueueStaysOneStatement: a job with no key and no Unique
// needs no transaction of bq's own (driver.Atomic's one statement); a
// unique one does.
func TestPlainEnqueueStaysOneStatement(t *testing.T) {
	now := time.Now()
	plain := &driver.NewJob{Kind: "k", ScheduledAt: now}
	if admits([]*driver.NewJob{plain}, now) {
		t.Error("an unkeyed, non-unique job asks for a transaction")
	}
	unique := &driver.NewJob{Kind: "k", ScheduledAt: now.Add(time.Hour), UniqueKey: "ab"}
	if !admits([]*driver.NewJob{plain, unique}, now) {
		t.Error("a unique job (even scheduled) does not ask for a transaction: its check needs the key's lock")
	}
}
