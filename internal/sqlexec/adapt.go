package sqlexec

import (
	"context"
	"fmt"

	"github.com/bqueue/bq/internal/driver"
)

func (s Shared) keyAdapts(ctx context.Context, query string, args ...any) ([]driver.KeyAdapt, error) {
	return collect(ctx, s.c, func(r Row) (a driver.KeyAdapt, err error) {
		err = r.Scan(&a.Key, &a.Limit, &a.Min, &a.Successes, At(&a.AdaptedAt))
		return a, err
	}, query, args...)
}

func (s Shared) KeyAdaptGet(ctx context.Context, key string) (driver.KeyAdapt, bool, error) {
	out, err := s.keyAdapts(ctx, s.q.GetKeyAdapt, s.c.KeyArgs(key)...)
	if err != nil {
		return driver.KeyAdapt{}, false, fmt.Errorf("read adaptive limit of key %q: %w", key, err)
	}
	if len(out) == 0 {
		return driver.KeyAdapt{}, false, nil
	}
	return out[0], true, nil
}

func (s Shared) KeyAdaptSet(ctx context.Context, a driver.KeyAdapt) error {
	if err := s.c.CheckKey(a.Key); err != nil {
		return fmt.Errorf("set adaptive limit: %w", err)
	}
	args := append(s.c.KeyArgs(a.Key), a.Limit, a.Min, a.Successes, s.c.Time(a.AdaptedAt))
	if _, err := s.c.Write(ctx, s.q.SetKeyAdapt, args...); err != nil {
		return fmt.Errorf("set adaptive limit of key %q: %w", a.Key, err)
	}
	return nil
}

func (s Shared) KeyAdaptDelete(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Write(ctx, s.q.DeleteKeyAdapt, s.c.KeyArgs(key)...)
	if err != nil {
		return false, fmt.Errorf("clear adaptive limit of key %q: %w", key, err)
	}
	return n == 1, nil
}

func (s Shared) KeyAdaptList(ctx context.Context, max int) ([]driver.KeyAdapt, error) {
	out, err := s.keyAdapts(ctx, s.q.ListKeyAdapt, max)
	if err != nil {
		return nil, fmt.Errorf("list adaptive limits: %w", err)
	}
	return out, nil
}
