package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"time"
)

// checkpointEvery is how often the background checkpointer copies the WAL
// into the database file.
const checkpointEvery = 200 * time.Millisecond

// checkpointer moves WAL checkpoints off the commit path. SQLite's
// automatic checkpoint runs inside the COMMIT that crosses the WAL's
// threshold (1,000 pages by default), and that commit's writer holds the
// driver's write slot while the pages are copied and the file synced:
// every writer of the process waits, which was most of the p95 and p99 of
// enqueue-to-start latency at 500 jobs/s. bq's connections raise the
// threshold to 10,000 pages (a safety net, see pragmas) and this goroutine
// runs a PASSIVE checkpoint every checkpointEvery instead; PASSIVE never
// waits for, or blocks, readers and writers.
type checkpointer struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func startCheckpointer(db *sql.DB) *checkpointer {
	c := &checkpointer{stop: make(chan struct{}), done: make(chan struct{})}
	go c.run(db)
	return c
}

func (c *checkpointer) run(db *sql.DB) {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
		cancel()
		// A busy checkpoint (another process's) is retried next tick; a
		// closed database ends the loop.
		if err != nil && strings.Contains(err.Error(), "database is closed") {
			return
		}
	}
}

// close stops the checkpointer and waits for it.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
