package bq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The queue's history: what the dashboard's charts and `bq status
// --watch` draw. The database keeps it a day, minute by minute (see
// driver.HistoryStore): each worker process adds what it counted once a
// minute, the first dispatcher of each minute snapshots the depth, and
// dispatchers prune what is older than a day.

// HistoryKeep is how long the database keeps the history.
const HistoryKeep = 24 * time.Hour

// HistoryOptions selects what History returns. Zero values take the
// defaults.
type HistoryOptions struct {
	// Since is how far back to go. Default 1h, at most HistoryKeep (24h).
	Since time.Duration
	// Queue limits the throughput and depth to one queue. Default: every
	// queue. Keys are never limited to a queue.
	Queue string
	// Keys is how many of the most blocked keys to follow. Default 5, at
	// most 10.
	Keys int
}

// History is the queue minute by minute.
type History struct {
	// Minutes has every minute from the first to the current one, oldest
	// first, with or without data.
	Minutes []HistoryMinute `json:"minutes"`
	// Keys are the keys that had the most jobs blocked in any minute
	// of the span, most first.
	Keys []KeyHistory `json:"keys"`
}

// HistoryMinute is one minute of the queue.
type HistoryMinute struct {
	At time.Time `json:"at"`
	// Completed and Failed count the runs that ended in the minute;
	// Failed counts every run that returned an error, whether retried or
	// failed for good. Each worker process writes its counts once a
	// minute: the current minute fills in as they do, and a process that
	// dies loses at most its last minute.
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// Snapped: a dispatcher recorded the depth early in the minute, at
	// its first pass in it. Without it (no dispatcher ran) the depth is
	// unknown, and 0.
	Snapped   bool `json:"snapped"`
	Ready     int  `json:"ready"`
	Running   int  `json:"running"`
	Blocked   int  `json:"blocked"`
	Scheduled int  `json:"scheduled"`
}

// KeyHistory is one key's blocked jobs, minute by minute.
type KeyHistory struct {
	Key string `json:"key"`
	// Blocked has one count per entry of History.Minutes: 0 where the key
	// was not among the 10 most blocked keys of the minute's snapshot,
	// or no snapshot was taken (HistoryMinute.Snapped).
	Blocked []int `json:"blocked"`
	// Peak is the most jobs blocked in one minute.
	Peak int `json:"peak"`
}

// History returns the queue's last hour (or o.Since), minute by minute:
// completed and failed runs, the depth of each state, and the blocked
// jobs of the most blocked keys. Every process reads the same history.
func (c *Client) History(ctx context.Context, o HistoryOptions) (*History, error) {
	if o.Queue != "" {
		if err := validateQueue(o.Queue); err != nil {
			return nil, fmt.Errorf("%w: History: %w", ErrInvalidArgument, err)
		}
	}
	since := min(max(cmp.Or(o.Since, time.Hour), time.Minute), HistoryKeep)
	keys := min(max(cmp.Or(o.Keys, 5), 1), driver.MaxHistoryKeys)
	hs, err := c.historyStore()
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now().Truncate(time.Minute)
	from := now.Add(-since + time.Minute)
	raw, err := hs.HistoryList(ctx, from, o.Queue)
	if err != nil {
		return nil, fmt.Errorf("history: %w", c.explainErr(ctx, err))
	}
	return buildHistory(raw, from, now, keys), nil
}

// buildHistory lays raw out minute by minute from `from` to `last`.
func buildHistory(raw driver.History, from, last time.Time, keys int) *History {
	n := int(last.Sub(from)/time.Minute) + 1
	h := &History{Minutes: make([]HistoryMinute, n), Keys: []KeyHistory{}}
	for i := range h.Minutes {
		h.Minutes[i].At = from.Add(time.Duration(i) * time.Minute).UTC()
	}
	index := func(t time.Time) (int, bool) {
		d := t.Sub(from)
		return int(d / time.Minute), d >= 0 && d < time.Duration(n)*time.Minute
	}
	for _, r := range raw.Rows {
		if i, ok := index(r.Minute); ok {
			m := &h.Minutes[i]
			m.Completed, m.Failed = r.Completed, r.Failed
			m.Ready, m.Running, m.Blocked, m.Scheduled = r.Ready, r.Running, r.Blocked, r.Scheduled
		}
	}
	for _, t := range raw.Snapped {
		if i, ok := index(t); ok {
			h.Minutes[i].Snapped = true
		}
	}
	byKey := map[string]*KeyHistory{}
	for _, k := range raw.Keys {
		i, ok := index(k.Minute)
		if !ok {
			continue
		}
		kh := byKey[k.Key]
		if kh == nil {
			kh = &KeyHistory{Key: k.Key, Blocked: make([]int, n)}
			byKey[k.Key] = kh
		}
		kh.Blocked[i] = k.Blocked
		kh.Peak = max(kh.Peak, k.Blocked)
	}
	for _, kh := range byKey {
		h.Keys = append(h.Keys, *kh)
	}
	slices.SortFunc(h.Keys, func(a, b KeyHistory) int {
		return cmp.Or(cmp.Compare(b.Peak, a.Peak), cmp.Compare(a.Key, b.Key))
	})
	if len(h.Keys) > keys {
		h.Keys = h.Keys[:keys]
	}
	return h
}

// historyStore is the driver's history; every driver bq ships has one.
func (c *Client) historyStore() (driver.HistoryStore, error) {
	hs, ok := driver.HistoryOf(c.drv)
	if !ok {
		return nil, fmt.Errorf("history: the %s driver keeps no history", c.drv.Dialect())
	}
	return hs, nil
}

// KeySearch names the keys SearchKeys looks for: those that start with
// Prefix and end with Suffix (at least one of them set), compared byte
// for byte: no case folding, and '%', '_' or '*' match themselves.
type KeySearch struct {
	Prefix, Suffix string
	// Max is how many keys to return. Default 20, at most 100.
	Max int
}

// SearchKeys finds keys in use (those with a semaphore: a ready,
// running or blocked job, or one lately) by the start or end of their
// name, in byte order, and reports whether there were more than Max.
// Search "/acme" as a suffix for tenant acme of every group, or
// "reports.export/" as a prefix for that group's keys.
func (c *Client) SearchKeys(ctx context.Context, s KeySearch) ([]KeyHealth, bool, error) {
	if s.Prefix == "" && s.Suffix == "" {
		return nil, false, fmt.Errorf("%w: SearchKeys: give a prefix or a suffix", ErrInvalidArgument)
	}
	for _, part := range []string{s.Prefix, s.Suffix} {
		if err := validateKey(part); err != nil {
			return nil, false, fmt.Errorf("%w: SearchKeys: %w", ErrInvalidArgument, err)
		}
	}
	limit := min(max(cmp.Or(s.Max, 20), 1), 100)
	ks, ok := c.drv.Exec().(driver.KeySearcher)
	if !ok {
		return nil, false, errors.New("search keys: the driver cannot search keys")
	}
	found, err := ks.KeySearch(ctx, s.Prefix, s.Suffix, limit+1)
	if err != nil {
		return nil, false, c.explainErr(ctx, err)
	}
	more := len(found) > limit
	out := make([]KeyHealth, 0, min(len(found), limit))
	for _, sem := range found[:min(len(found), limit)] {
		out = append(out, keyHealth(sem))
	}
	return out, more, nil
}
