//go:build !unix

package sqlite

import "context"

// MigrationLock does nothing where advisory file locks are unavailable:
// migrate from one process at a time there.
func (d *engine) MigrationLock(context.Context) (func(), error) { return func() {}, nil }
