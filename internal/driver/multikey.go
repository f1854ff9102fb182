package driver

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// MaxKeys is the most concurrency keys one job may carry.
const MaxKeys = 4

// A multi-key job carries more than one concurrency key: its Limit and
// More. It holds a slot of every one of them while ready, claimed or
// waiting in a rate line, takes them all at once (never one while it
// waits for another) and waits in the line of one key at a time: the key
// its blocked row names. Every key of a multi-key job has a row in the
// job_keys table, so the job is counted as a holder of each (HolderCount,
// HolderList) and a semaphore its blocked job still needs is not deleted
// as idle.

// Keys is every concurrency key of the job, its Limit first; nil when it
// has none.
func (j *Job) Keys() []Limit { return keysOf(j.Limit, j.More) }

// Keys is every concurrency key of the job, its Limit first.
func (j *NewJob) Keys() []Limit { return keysOf(j.Limit, j.More) }

func keysOf(l Limit, more []Limit) []Limit {
	if l.Key == "" {
		return nil
	}
	return append([]Limit{l}, more...)
}

// storedLimit is one key of More as the jobs table stores it.
type storedLimit struct {
	Key        string `json:"key"`
	To         int    `json:"to,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Discard    bool   `json:"discard,omitempty"`
	MaxBlocked int    `json:"max_blocked,omitempty"`
}

// EncodeMore is the jobs.more_keys column of a job's More: JSON text,
// or nil (SQL NULL) for a job with one key or none.
func EncodeMore(more []Limit) ([]byte, error) {
	if len(more) == 0 {
		return nil, nil
	}
	out := make([]storedLimit, len(more))
	for i, l := range more {
		out[i] = storedLimit{Key: l.Key, To: l.To, DurationMS: l.Duration.Milliseconds(), Discard: l.OnConflict == Discard, MaxBlocked: l.MaxBlocked}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the job's further concurrency keys: %w", err)
	}
	return b, nil
}

// DecodeMore reads back what EncodeMore wrote; empty or NULL is none.
func DecodeMore(b []byte) ([]Limit, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in []storedLimit
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("decode the job's further concurrency keys %q: %w", b, err)
	}
	out := make([]Limit, len(in))
	for i, s := range in {
		out[i] = Limit{Key: s.Key, To: s.To, Duration: time.Duration(s.DurationMS) * time.Millisecond, MaxBlocked: s.MaxBlocked}
		if s.Discard {
			out[i].OnConflict = Discard
		}
	}
	return out, nil
}

// MaxSlots is the most slots a job may take of each of its keys.
const MaxSlots = 1000

// SlotsOf is a job's Slots as stored: 0 (unset) is 1.
func SlotsOf(n int) int { return max(n, 1) }

// HeadByHead reports whether a blocked job waits in a line that package
// semaphore promotes head by head (counted in its semaphore's Multi): a
// multi-key job, or one that takes more than one slot of its key.
func HeadByHead(keys, slots int) bool { return keys > 1 || slots > 1 }

// SortedKeys returns a copy of limits sorted by key: the order keys are
// locked in.
func SortedKeys(limits []Limit) []Limit {
	out := slices.Clone(limits)
	slices.SortFunc(out, func(a, b Limit) int { return cmp.Compare(a.Key, b.Key) })
	return out
}

// LineHead is one job at the front of a key's blocked line.
type LineHead struct {
	JobID    int64
	Queue    string
	Priority int
	// Keys is every concurrency key of the job (Job.Keys): one for a
	// single-key job.
	Keys []Limit
	// Slots: how many slots of each of its keys the job takes.
	Slots int
}

// HolderCount is what a key's rows say its semaphore should hold.
type HolderCount struct {
	// Holders: the key's ready and claimed jobs and its jobs waiting in a
	// rate line (they keep their slots), counting every multi-key job
	// that names the key among its keys; a job of k slots counts k.
	Holders int
	// Blocked: the jobs waiting in the key's line; Multi, how many of
	// them are multi-key jobs or take more than one slot (Heavy).
	Blocked, Multi int
}

// MultiKeyStore is what the promotion of a line that holds multi-key
// jobs needs (package semaphore). Callers hold the semaphore locks of
// every key named.
type MultiKeyStore interface {
	// LineListHeads returns the first n jobs of key's blocked line in
	// promotion order (priority descending, then id), each with its keys.
	LineListHeads(ctx context.Context, key string, n int) ([]LineHead, error)
	// LineMove moves blocked job id from the line of key from to the
	// line of key to; its priority and id keep, so its place there is by
	// them. It fails if the job is not blocked in from's line.
	LineMove(ctx context.Context, id int64, from, to string) error
}

// MultiBatcher promotes the lines of many keys holding multi-key jobs in
// a fixed number of statements (package semaphore; one key is a batch of
// one). Callers hold the semaphore locks of every key whose line they
// read or promote.
type MultiBatcher interface {
	// LineListHeadsMany returns, for each keys[i] (sorted, distinct), its first
	// ns[i] blocked jobs in promotion order, as LineListHeads does (out[i];
	// empty for a key with none or ns[i] 0).
	LineListHeadsMany(ctx context.Context, keys []string, ns []int) ([][]LineHead, error)
	// SemaphoreTryLockMany locks, in key order, the semaphores of keys
	// (sorted, distinct) that no other transaction holds, skipping the rest
	// without waiting (the caller's own are locked, not skipped), and
	// returns the rows it locked in key order; Override and Policy are not
	// read. A missing key is absent.
	SemaphoreTryLockMany(ctx context.Context, keys []string) ([]Semaphore, error)
	// LinePromoteFirst moves the first counts[i] blocked jobs of each keys[i]'s
	// line (sorted, distinct) to ready, in promotion order (priority
	// descending, then id), and returns what each moved, JobIDs in that
	// order. It changes no semaphore: the caller counts.
	LinePromoteFirst(ctx context.Context, keys []string, counts []int, now time.Time) ([]Promotion, error)
}
