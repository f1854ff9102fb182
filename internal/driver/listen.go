package driver

// DeafListener is what a Notifier's Listen hands its failed callback when
// its LISTEN took hold but a notification it sent itself did not come
// back (PostgreSQL behind a pooler in transaction mode, where LISTEN
// succeeds on a server connection other clients then use). It is no
// failure of the database, and no outage: workers poll as they would
// without a notifier. Listen hands it once, then tries again now and
// then without saying so; callers log it as a warning.
type DeafListener struct {
	// Reason says what was not heard, through which host, and the fix.
	Reason string
}

func (e *DeafListener) Error() string { return e.Reason }
