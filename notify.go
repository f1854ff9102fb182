package bq

import (
	"context"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// notifyEvery bounds how often one queue is announced to other processes:
// a listener woken less than this ago is still claiming.
const notifyEvery = 20 * time.Millisecond

// ready tells this process's workers and, where the database can, every
// other process's, that queue ("" for all) has ready jobs.
func (c *Client) ready(ctx context.Context, queue string) {
	c.wake(queue)
	n, ok := c.drv.(driver.Notifier)
	if !ok || !c.shouldNotify(queue) {
		return
	}
	if err := n.Notify(ctx, []string{queue}); err != nil {
		c.log.Warn("notify other processes; they will find the jobs at their next poll", "queue", queue, "error", err)
	}
}

// shouldNotify debounces notifications per queue.
func (c *Client) shouldNotify(queue string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if last, ok := c.notified[queue]; ok && now.Sub(last) < notifyEvery {
		return false
	}
	c.notified[queue] = now
	return true
}

// notifyTx announces queues from inside the caller's transaction.
func (c *Client) notifyTx(ctx context.Context, tx any, queues []string) {
	if n, ok := c.drv.(driver.Notifier); ok && len(queues) > 0 {
		if err := n.NotifyTx(ctx, tx, queues); err != nil {
			c.log.Warn("notify other processes; they will find the jobs at their next poll", "queues", queues, "error", err)
		}
	}
}

// listen wakes this process's workers when another process announces
// ready jobs, until ctx ends. Without a notifier, workers poll.
func (c *Client) listen(ctx context.Context) {
	n, ok := c.drv.(driver.Notifier)
	if !ok {
		return
	}
	_ = n.Listen(ctx, c.wake, func(err error) {
		c.log.Warn("lost the notification connection; polling until it is back", "error", err)
	})
}
