// Package errtrack stands for the application's error tracker, which
// docs/middleware.md reports failed jobs to.
package errtrack

import "context"

// Client reports errors and panics.
type Client struct{}

// Report reports err, with key-value pairs.
func (c *Client) Report(ctx context.Context, err error, kv ...any) {}

// ReportPanic reports a panic's value and stack, with key-value pairs.
func (c *Client) ReportPanic(ctx context.Context, v any, stack string, kv ...any) {}
