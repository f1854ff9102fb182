package bq

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Bounds of a key report.
const (
	maxHolders  = 100
	maxLineShow = 50
)

// Holder is a job holding one slot of a concurrency key: ready (waiting
// for a worker) or running, or, a sequence's job (Concurrency.Sequence),
// scheduled for its retry, or failed in a sequence that halts, keeping its
// place.
type Holder struct {
	JobID int64    `json:"job_id"`
	Kind  string   `json:"kind"`
	Queue string   `json:"queue"`
	State JobState `json:"state"` // ready, running, or scheduled or failed (a sequence's)
	// The process running it; zero unless running.
	ProcessID   int64  `json:"process_id,omitzero"`
	ProcessName string `json:"process_name,omitzero"`
	// ProcessAlive: the process heartbeats; false also when it is gone.
	ProcessAlive bool      `json:"process_alive,omitzero"`
	RunningSince time.Time `json:"running_since,omitzero"`
}

// BlockedJob is one job in a key's blocked line.
type BlockedJob struct {
	JobID    int64     `json:"job_id"`
	Kind     string    `json:"kind"`
	Queue    string    `json:"queue"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
}

// KeyState is one concurrency key: its limit, its holders and its line.
type KeyState struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	// Exists: the key has a semaphore (it is in use or was lately).
	Exists bool `json:"exists"`
	Limit  int  `json:"limit"`
	// Free is the semaphore's free value: its limit minus its holders.
	// It may be 0 or below when the limit was lowered under the holders.
	Free int `json:"free"`
	// Taken counts the slots held, Holders lists up to 100 of them.
	Taken   int      `json:"taken"`
	Holders []Holder `json:"holders"`
	// Blocked counts jobs waiting for a slot; Line lists the first 50 in
	// promotion order.
	Blocked   int          `json:"blocked"`
	Line      []BlockedJob `json:"line"`
	ExpiresAt time.Time    `json:"expires_at,omitzero"`
	// Sequence: the key's newest unfinished job is a sequence's
	// (Concurrency.Sequence): its jobs run one at a time in enqueue
	// order, a failing job keeping its place (a scheduled holder).
	Sequence bool `json:"sequence,omitzero"`
	// Adaptive: throttles (bq.Throttled) lowered the key's limit, now
	// Limit; nil while it runs at its own.
	Adaptive *AdaptedKey `json:"adaptive,omitempty"`
}

// KeyState reports a full concurrency key (Group + "/" + Key).
func (c *Client) KeyState(ctx context.Context, key string) (*KeyState, error) {
	if err := checkKeyArg("KeyState", key); err != nil {
		return nil, err
	}
	k, err := c.keyState(ctx, key, maxLineShow)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", key, c.explainErr(ctx, err))
	}
	return k, nil
}

func (c *Client) keyState(ctx context.Context, key string, line int) (*KeyState, error) {
	ex := c.drv.Exec()
	k := &KeyState{Key: key, Group: driver.GroupOf(key), Holders: []Holder{}, Line: []BlockedJob{}}
	s, ok, err := ex.SemaphoreGet(ctx, key)
	if err != nil {
		return nil, err
	}
	if ok {
		k.Exists, k.Limit, k.Free, k.Taken, k.Blocked, k.ExpiresAt = true, s.Limit, s.Value, s.Limit-s.Value, s.Blocked, s.ExpiresAt
		l, _, found, err := ex.JobLimitGetLatest(ctx, key)
		if err != nil {
			return nil, err
		}
		k.Sequence = found && l.Sequence
	}
	if a, ok, err := ex.KeyAdaptGet(ctx, key); err != nil {
		return nil, err
	} else if ok {
		k.Adaptive = (*AdaptedKey)(&a)
	}
	holders, err := ex.HolderList(ctx, key, maxHolders)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	for _, h := range holders {
		out := c.holder(h, now)
		if h.Held {
			// A sequence's job keeping its slot: scheduled or failed.
			info, ok, err := ex.JobGet(ctx, h.JobID)
			if err != nil {
				return nil, err
			}
			if ok {
				out.State = JobState(info.State)
			}
		}
		k.Holders = append(k.Holders, out)
	}
	if line > 0 && k.Blocked > 0 {
		blocked, err := ex.LineList(ctx, key, line)
		if err != nil {
			return nil, err
		}
		for _, b := range blocked {
			k.Line = append(k.Line, BlockedJob(b))
		}
	}
	return k, nil
}

func (c *Client) holder(h driver.Holder, now time.Time) Holder {
	out := Holder{JobID: h.JobID, Kind: h.Kind, Queue: h.Queue, State: StateReady}
	if h.Held {
		out.State = StateScheduled // or failed: keyState reads which
	}
	if h.Running {
		out.State, out.ProcessID, out.ProcessName, out.RunningSince = StateRunning, h.ProcessID, h.ProcessName, h.ClaimedAt
		// The claim's process interval is not read back: judge by the
		// reaper's threshold alone.
		out.ProcessAlive = c.alive(h.ProcessBeat, 0, now)
	}
	return out
}
