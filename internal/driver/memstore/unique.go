package memstore

import (
	"context"
	"errors"
	"slices"

	"github.com/bqueue/bq/internal/driver"
)

// UniqueLock takes no lock: the store has one caller at a time.
func (s *Store) UniqueLock(context.Context, string) error { return nil }

func (s *Store) UniqueGet(_ context.Context, key string, states []driver.JobState) (int64, driver.JobState, bool, error) {
	var best *Row
	for _, r := range s.Jobs {
		if r.UniqueKey == key && slices.Contains(states, r.State) && (best == nil || r.ID > best.ID) {
			best = r
		}
	}
	if best == nil {
		return 0, "", false, nil
	}
	return best.ID, best.State, true, nil
}

func (s *Store) UniqueSet(_ context.Context, id int64, key string) error {
	r, ok := s.Jobs[id]
	if !ok {
		return errors.New("memstore: no such job")
	}
	r.UniqueKey = key
	return nil
}

func (s *Store) UniqueGetKey(_ context.Context, id int64) (string, error) {
	if r, ok := s.Jobs[id]; ok {
		return r.UniqueKey, nil
	}
	return "", nil
}

// HolderList lists key's ready and running jobs in id order, so a
// discard names its holder as the drivers' Inspector does.
func (s *Store) HolderList(_ context.Context, key string, max int) ([]driver.Holder, error) {
	var out []driver.Holder
	for _, state := range []driver.JobState{driver.StateReady, driver.StateRunning, driver.StateScheduled, driver.StateFailed} {
		for _, r := range s.Of(key, state) {
			held := state == driver.StateScheduled || state == driver.StateFailed
			if held && !r.SlotHeld {
				continue
			}
			out = append(out, driver.Holder{JobID: r.ID, Kind: r.Kind, Queue: r.Queue, Running: state == driver.StateRunning, Held: held})
		}
	}
	slices.SortFunc(out, func(a, b driver.Holder) int { return int(a.JobID - b.JobID) })
	return out[:min(max, len(out))], nil
}
