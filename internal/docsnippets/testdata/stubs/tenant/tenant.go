// Package tenant stands for the application's own tenant package, which
// docs/middleware.md reads a request's tenant from.
package tenant

import "context"

// From returns the tenant of a request's context.
func From(ctx context.Context) (string, bool) { return "", false }
