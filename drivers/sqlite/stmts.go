package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/bqueue/bq/internal/sqlexec"
)

// stmtCache prepares each of bq's statements once and database/sql keeps
// it prepared per connection: modernc.org/sqlite otherwise parses and
// plans the SQL text on every call, a third of the CPU time of a steady
// run. Statements are prepared only when the pool has no connection
// limit: preparing takes a connection of its own, and with a limited
// pool a transaction asking for one could wait forever for itself.
// Without a limit (bq.Open's file databases) a statement that fails to
// prepare (tables not created yet) runs unprepared, with its real error.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}}
}

func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if c.db.Stats().MaxOpenConnections != 0 {
		return nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// prepared runs statements through the cache, on the database or in a
// transaction bq owns.
type prepared struct {
	db    sqlexec.DB
	tx    *sql.Tx // set when db is a transaction
	cache *stmtCache
}

func (p prepared) stmt(ctx context.Context, query string) *sql.Stmt {
	st := p.cache.get(ctx, query)
	if st != nil && p.tx != nil {
		return p.tx.StmtContext(ctx, st)
	}
	return st
}

func (p prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

func (p prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

func (p prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}
