package sqlexec

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// ReadyByKey reads a fair-share queue's ready jobs in claim order, keeping
// each key's first max, then its running jobs by key: two statements of
// the claim's transaction. A key with running jobs and none ready has no
// JobIDs and, when it has a weight of its own, a Weight of 0 (no ready
// row carried it).
func (s Shared) ReadyByKey(ctx context.Context, queue string, max int) ([]driver.KeyReady, error) {
	type row struct {
		key    string
		id     int64
		weight int
	}
	rows, err := collect(ctx, s.c, func(r Row) (x row, err error) {
		err = r.Scan(&x.key, &x.id, &x.weight)
		return x, err
	}, s.q.ReadyByKey, s.c.Text(queue))
	if err != nil {
		return nil, readyByKeyErr(queue, err)
	}
	var out []driver.KeyReady
	at := map[string]int{}
	for _, x := range rows {
		i, ok := at[x.key]
		if !ok {
			i = len(out)
			at[x.key] = i
			out = append(out, driver.KeyReady{Key: x.key, Weight: x.weight})
		}
		out[i].Ready++
		if len(out[i].JobIDs) < max {
			out[i].JobIDs = append(out[i].JobIDs, x.id)
		}
	}
	type running struct {
		key string
		n   int
	}
	counts, err := collect(ctx, s.c, func(r Row) (x running, err error) {
		err = r.Scan(&x.key, &x.n)
		return x, err
	}, s.q.RunningByKey, s.c.Text(queue))
	if err != nil {
		return nil, readyByKeyErr(queue, err)
	}
	for _, c := range counts {
		i, ok := at[c.key]
		if !ok {
			// Running, none ready: its share counts, it takes nothing.
			i = len(out)
			at[c.key] = i
			out = append(out, driver.KeyReady{Key: c.key})
		}
		out[i].Running = c.n
	}
	slices.SortFunc(out, func(a, b driver.KeyReady) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
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
