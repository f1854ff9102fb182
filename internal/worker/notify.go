package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// announcer sends notifications for this client, group-commit style: a
// queue marked ready while one notification is in flight goes out in the
// next, with every other queue marked meanwhile. Enqueue never waits for
// it, and under load one statement announces many enqueues, with no
// timer delaying any of them.
type announcer struct {
	n       driver.Notifier
	origin  string // the client's (driver.Notifier)
	log     func(err error, queues []string)
	mu      sync.Mutex
	pending map[string]bool
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newAnnouncer(n driver.Notifier, origin string, log func(error, []string)) *announcer {
	a := &announcer{n: n, origin: origin, log: log, pending: map[string]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// mark asks for queue to be announced.
func (a *announcer) mark(queue string) {
	a.mu.Lock()
	a.pending[queue] = true
	a.mu.Unlock()
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *announcer) run() {
	defer close(a.done)
	for {
		select {
		case <-a.stop:
			a.flush() // what was marked before Close still goes out
			return
		case <-a.kick:
			a.flush()
		}
	}
}

func (a *announcer) flush() {
	a.mu.Lock()
	queues := make([]string, 0, len(a.pending))
	for q := range a.pending {
		queues = append(queues, q)
	}
	clear(a.pending)
	a.mu.Unlock()
	if len(queues) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.n.Notify(ctx, a.origin, queues); err != nil {
		a.log(err, queues)
	}
}

func (a *announcer) close() {
	close(a.stop)
	<-a.done
}

// ready tells this process's workers and, where the database can, every
// other process's, that queue ("" for all) has ready jobs.
func (c *Runtime) Ready(queue string) {
	c.wake(queue)
	if a := c.announcer(); a != nil {
		a.mark(queue)
	}
}

// readyAll is ready for each queue.
func (c *Runtime) ReadyAll(queues []string) {
	for _, q := range queues {
		c.Ready(q)
	}
}

// announcer starts the client's announcer on first use; nil when the
// driver cannot notify.
func (c *Runtime) announcer() *announcer {
	n, ok := c.drv.(driver.Notifier)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.announce == nil && !c.closed {
		c.announce = newAnnouncer(n, c.origin, func(err error, queues []string) {
			c.log.Warn("notify other processes; they will find the jobs at their next poll", "queues", queues, "error", err)
		})
	}
	return c.announce
}

// notifyTx announces queues from inside the caller's transaction.
func (c *Runtime) NotifyTx(ctx context.Context, tx any, queues []string) {
	if n, ok := c.drv.(driver.Notifier); ok && len(queues) > 0 {
		if err := n.NotifyTx(ctx, tx, queues); err != nil {
			c.log.Warn("notify other processes; they will find the jobs at their next poll", "queues", queues, "error", err)
		}
	}
}

// listen wakes this process's workers when another process announces
// ready jobs, until ctx ends. Without a notifier, workers poll.
func (c *Runtime) listen(ctx context.Context) {
	n, ok := c.drv.(driver.Notifier)
	if !ok {
		return
	}
	// Logged as part of an outage: a listener that cannot reach the
	// database fails at every attempt. A listener that hears nothing (a
	// pooler in transaction mode) is no outage: said once, as a warning.
	_ = n.Listen(ctx, c.origin, c.wake, func(err error) {
		if deaf, ok := errors.AsType[*driver.DeafListener](err); ok {
			c.log.Warn(deaf.Reason)
			return
		}
		c.dbFailed("notifications (polling until they are back)", err)
	})
}

// rateWaits tells this process's dispatcher, if it runs one, that a job
// went to a rate line, so it looks at the lines now rather than at its
// next poll.
func (c *Runtime) rateWaits() {
	select {
	case c.rateWake <- struct{}{}:
	default:
	}
}
