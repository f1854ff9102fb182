package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// Notifications: a listener that starts listening wakes every queue once,
// since what was notified before it listened is lost to it; then it hears
// what is notified.
var _ = add("notify",
	test{"ListenWakesEveryQueueOnceListening", func(t *testing.T, f *fixture) {
		n, ok := f.d.(driver.Notifier)
		if !ok {
			t.Skipf("%s keeps no notifications: its workers poll", f.d.Dialect())
		}
		heard, stop := listen(t, f, n, "me")
		defer stop()
		wait := func(want func(string) bool, what string) {
			t.Helper()
			deadline := time.After(5 * time.Second)
			for {
				select {
				case q := <-heard:
					if want(q) {
						return
					}
				case <-deadline:
					t.Fatalf("the listener did not call ready with %s within 5s", what)
				}
			}
		}
		wait(func(q string) bool { return q == "" }, `"" (every queue) once it listened`)
		if err := n.Notify(f.ctx, "", []string{"q1"}); err != nil {
			t.Fatal(err)
		}
		if f.d.Dialect() == driver.SQLite {
			// Its commits are the signal (Notify does nothing), and it
			// cannot tell queues apart: it wakes every one.
			f.insert(T0, job("q1"))
		}
		wait(func(q string) bool { return q == "q1" || (q == "" && f.d.Dialect() == driver.SQLite) }, `"q1" after Notify`)
	}},
	// A listener skips (on PostgreSQL) or hears (elsewhere) what its own
	// client notified, and hears another client's.
	test{"ListenSkipsOnlyItsOwnOrigin", func(t *testing.T, f *fixture) {
		n, ok := f.d.(driver.Notifier)
		if !ok || f.d.Dialect() == driver.SQLite {
			t.Skipf("%s tells no queues apart", f.d.Dialect())
		}
		heard, stop := listen(t, f, n, "me")
		defer stop()
		next := func() string {
			t.Helper()
			select {
			case q := <-heard:
				return q
			case <-time.After(5 * time.Second):
				t.Fatal("the listener called ready with nothing within 5s")
				return ""
			}
		}
		if q := next(); q != "" {
			t.Fatalf("first ready(%q), want \"\" once listening", q)
		}
		for _, s := range []struct{ origin, queue string }{{"me", "mine"}, {"you", "yours"}, {"", "nobody's"}} {
			if err := n.Notify(f.ctx, s.origin, []string{s.queue}); err != nil {
				t.Fatal(err)
			}
		}
		// PostgreSQL delivers in commit order: "mine", if heard, comes
		// before the others. MySQL's listener may wake a poll's queues in
		// any order.
		want := map[string]bool{"mine": true, "yours": true, "nobody's": true}
		if f.d.Dialect() == driver.Postgres {
			delete(want, "mine")
		}
		for len(want) > 0 {
			q := next()
			if q == "mine" && f.d.Dialect() == driver.Postgres {
				t.Fatal(`ready("mine"): the listener "me" did not skip what its own origin notified`)
			}
			delete(want, q)
		}
	}},
)

// listen runs n's listener as self until stop, sending every queue it
// wakes to heard.
func listen(t *testing.T, f *fixture, n driver.Notifier, self string) (heard <-chan string, stop func()) {
	ctx, cancel := context.WithCancel(f.ctx)
	ch := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Listen(ctx, self, func(q string) { ch <- q }, func(err error) { t.Errorf("listen: %v", err) })
	}()
	return ch, func() { cancel(); <-done }
}
