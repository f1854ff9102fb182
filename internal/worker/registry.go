package worker

import (
	"context"
	"errors"
	"sync"
)

// Definition is one job kind of this binary, as the runtime and bqtest
// need it (bq.Define makes them).
type Definition interface {
	Job
	Kind() string
	Queue() string
	// Work runs the job with args through its own middleware only, as
	// bqtest.Work does: no database, no lease.
	Work(ctx context.Context, args []byte, o WorkOptions) error
}

// WorkOptions describe the run Definition.Work makes.
type WorkOptions struct {
	ID       int64
	Attempt  int     // default 1
	Key      *string // default: the key the job's definition computes
	Metadata map[string]string
	Tags     []string // added to the definition's tags
}

// ErrNotRun marks a Work that could not run the job at all (its args do
// not decode, an option is invalid).
var ErrNotRun = errors.New("the job did not run")

// registry holds every valid definition of this process, by kind and by
// the value that defined it, and the errors of the kinds defined twice.
var registry = struct {
	sync.RWMutex
	byKind     map[string]Definition
	byOwner    map[any]Definition
	duplicates []error
}{byKind: map[string]Definition{}, byOwner: map[any]Definition{}}

// Register adds d, defined by owner (a *bq.Job), unless its kind is
// taken: then d is not registered by kind, and dup's error, told of the
// first definition, is returned and kept for Duplicates. Of still finds
// d by its owner.
func Register(owner any, d Definition, dup func(first Definition) error) error {
	registry.Lock()
	defer registry.Unlock()
	registry.byOwner[owner] = d
	if first, taken := registry.byKind[d.Kind()]; taken {
		err := dup(first)
		registry.duplicates = append(registry.duplicates, err)
		return err
	}
	registry.byKind[d.Kind()] = d
	return nil
}

// Duplicates returns the errors of every kind defined twice in this
// process, nil when there is none.
func Duplicates() error {
	registry.RLock()
	defer registry.RUnlock()
	return errors.Join(registry.duplicates...)
}

// Lookup is the definition of kind; nil when this binary has none.
func Lookup(kind string) Definition {
	registry.RLock()
	defer registry.RUnlock()
	return registry.byKind[kind]
}

// Of is the definition owner made; nil when it made none (it is
// invalid).
func Of(owner any) Definition {
	registry.RLock()
	defer registry.RUnlock()
	return registry.byOwner[owner]
}

// Queues lists the queues of every registered definition.
func Queues() []string {
	registry.RLock()
	defer registry.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, d := range registry.byKind {
		if !seen[d.Queue()] {
			seen[d.Queue()] = true
			out = append(out, d.Queue())
		}
	}
	return out
}
