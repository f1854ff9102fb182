package memstore

import (
	"context"
	"slices"
	"strings"

	"github.com/bqueue/bq/internal/driver"
)

func (s *Store) KeyAdaptGet(_ context.Context, key string) (driver.KeyAdapt, bool, error) {
	a, ok := s.Adapts[key]
	return a, ok, nil
}

func (s *Store) KeyAdaptSet(_ context.Context, a driver.KeyAdapt) error {
	s.Adapts[a.Key] = a
	return nil
}

func (s *Store) KeyAdaptDelete(_ context.Context, key string) (bool, error) {
	_, ok := s.Adapts[key]
	delete(s.Adapts, key)
	return ok, nil
}

func (s *Store) KeyAdaptList(_ context.Context, max int) ([]driver.KeyAdapt, error) {
	out := make([]driver.KeyAdapt, 0, len(s.Adapts))
	for _, a := range s.Adapts {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b driver.KeyAdapt) int { return strings.Compare(a.Key, b.Key) })
	return out[:min(len(out), max)], nil
}
