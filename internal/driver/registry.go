package driver

import (
	"context"
	"fmt"
	"sync"
)

// Opener opens the database a DSN names. It returns the driver's public
// value (what its New returns), so that a client opened from a DSN hands
// users the same type as one made on their own pool.
type Opener func(ctx context.Context, dsn string) (Public, error)

// Public is what a driver package hands users: harmless methods only.
// The engine inside is reached through EngineOf.
type Public interface {
	Dialect() string
	Close() error
}

// openers maps a DSN scheme ("postgres", "sqlite", ...) to the driver
// that registered it. Drivers register in init, as database/sql drivers
// do, so a program links only the drivers it imports.
var openers = struct {
	sync.RWMutex
	m map[string]Opener
}{m: map[string]Opener{}}

// Register makes open the opener of DSNs of each scheme. Two drivers
// claiming one scheme is a programming error: it panics.
func Register(open Opener, schemes ...string) {
	openers.Lock()
	defer openers.Unlock()
	for _, s := range schemes {
		if _, taken := openers.m[s]; taken {
			panic(fmt.Sprintf("bq: two drivers register the DSN scheme %q", s))
		}
		openers.m[s] = open
	}
}

// OpenerOf returns the opener registered for scheme.
func OpenerOf(scheme string) (Opener, bool) {
	openers.RLock()
	defer openers.RUnlock()
	open, ok := openers.m[scheme]
	return open, ok
}

// Opens adapts a driver's Open to an Opener. A failed Open returns a nil
// interface, not a nil *Driver wrapped in one.
func Opens[D Public](open func(ctx context.Context, dsn string) (D, error)) Opener {
	return func(ctx context.Context, dsn string) (Public, error) {
		d, err := open(ctx, dsn)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}
