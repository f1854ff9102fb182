package sqlexec

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// ReadyByKey reads a fair-share queue's first p.Rows ready jobs in claim
// order (all when 0), keeping each key's first p.Max, and its running
// slots by key, in one statement of the claim's transaction
// (sqltext.ReadyByKey); with p.PerKey, each key's first p.Max
// (ReadyPerKey), or all where the dialect has no such read. A key with
// running jobs and none read has no JobIDs, a Head of -1 and, when it has
// a weight of its own, a Weight of 0 (no ready row carried it).
func (s Shared) ReadyByKey(ctx context.Context, p driver.KeyViewParams) (driver.KeyView, error) {
	type row struct {
		running                            bool
		key                                string
		id                                 int64
		slots, weight, maxWeight, priority int
	}
	limit, query, perKey := int64(p.Rows), s.q.ReadyByKey, p.PerKey && s.q.ReadyPerKey != ""
	switch {
	case perKey:
		limit, query = int64(p.Max), s.q.ReadyPerKey
	case p.PerKey || p.Rows <= 0:
		limit = math.MaxInt64
	}
	if perKey && s.q.FillReadyKeys != "" {
		if _, err := s.c.Write(ctx, s.q.FillReadyKeys, s.c.Text(p.Queue)); err != nil {
			return driver.KeyView{}, readyByKeyErr(p.Queue, fmt.Errorf("fill the ready rows' keys: %w", err))
		}
	}
	rows, err := collect(ctx, s.c, func(r Row) (x row, err error) {
		var part int
		err = r.Scan(&part, &x.key, &x.id, &x.slots, &x.weight, &x.maxWeight, &x.priority)
		x.running = part == 1
		return x, err
	}, query, s.c.Text(p.Queue), limit, s.c.Text(p.Queue))
	if err != nil {
		return driver.KeyView{}, readyByKeyErr(p.Queue, err)
	}
	read := 0
	at := map[string]int{}
	for _, x := range rows {
		if !x.running {
			read++
		}
	}
	view := driver.KeyView{Whole: p.PerKey || p.Rows <= 0 || read < p.Rows, PerKey: perKey}
	n := 0
	for _, x := range rows {
		i, ok := at[x.key]
		if !ok {
			i = len(view.Keys)
			at[x.key] = i
			view.Keys = append(view.Keys, driver.KeyReady{Key: x.key, Head: -1})
		}
		k := &view.Keys[i]
		if x.running {
			// Running, perhaps none read: its share counts.
			k.Running = x.slots
			continue
		}
		view.MaxWeight = x.maxWeight
		if k.Head < 0 {
			k.Weight, k.Head = x.weight, n
		}
		n++
		if !p.PerKey || k.Ready < p.Max {
			k.Ready++
		}
		if len(k.JobIDs) < p.Max {
			k.JobIDs = append(k.JobIDs, x.id)
			k.Slots = append(k.Slots, x.slots)
		}
	}
	slices.SortFunc(view.Keys, func(a, b driver.KeyReady) int { return strings.Compare(a.Key, b.Key) })
	return view, nil
}

func readyByKeyErr(queue string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("read the ready and running jobs of fair-share queue %q by key: %w", queue, err)
}

func (s Shared) KeyWeightSet(ctx context.Context, key string, weight int, now time.Time) error {
	if err := s.c.CheckKey(key); err != nil {
		return fmt.Errorf("set key weight: %w", err)
	}
	if _, err := s.c.Write(ctx, s.q.SetKeyWeight, append(s.c.KeyArgs(key), weight, s.c.Time(now))...); err != nil {
		return fmt.Errorf("set weight of key %q: %w", key, err)
	}
	return nil
}

func (s Shared) KeyWeightDelete(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Write(ctx, s.q.DeleteKeyWeight, s.c.KeyArgs(key)...)
	if err != nil {
		return false, fmt.Errorf("clear weight of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (s Shared) KeyWeightList(ctx context.Context) ([]driver.KeyWeight, error) {
	out, err := collect(ctx, s.c, func(r Row) (w driver.KeyWeight, err error) {
		err = r.Scan(&w.Key, &w.Weight, At(&w.UpdatedAt))
		return w, err
	}, s.q.KeyWeights)
	if err != nil {
		return nil, fmt.Errorf("list key weights: %w", err)
	}
	return out, nil
}
