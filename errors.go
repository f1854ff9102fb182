package bq

import "errors"

var (
	// ErrInvalidJob wraps every problem with a job definition or an
	// enqueue (its options, its key); the message names the field and the
	// fix.
	ErrInvalidJob = errors.New("invalid job")
	// ErrInvalidArgument wraps every other bad input refused before it
	// reaches the database (a key or limit given to SetKeyLimit, a queue
	// policy, a Config); the message names the argument and the fix.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotMigrated reports that bq's tables are missing or older than
	// this version of bq.
	ErrNotMigrated = errors.New("bq tables are missing or out of date: run client.Migrate(ctx) or `bq migrate up --dsn ...`")
	// ErrConflict wraps a transient conflict (deadlock, serialization
	// failure, busy database) met inside the caller's transaction: roll
	// the transaction back and run it again. Inside its own transactions
	// bq retries these itself.
	ErrConflict = errors.New("transient database conflict: roll back and retry the transaction")
)

// permanentError marks an error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so the job fails at once, without the retries left
// to it: return it from a job whose input can never succeed.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

func permanent(err error) error { return Permanent(err) }

func isPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
