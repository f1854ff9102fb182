// Command rawtx does not compile: it passes a raw pgx.Tx and a raw
// *sql.Tx where a bq.Tx is wanted. TestRawTxDoesNotCompile checks that
// the compiler's error names the wrappers.
package main

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/bqueue/bq"
)

var note = bq.Define("rawtx.note", func(context.Context, struct{}) error { return nil }, bq.JobOptions[struct{}]{})

func main() {
	ctx := context.Background()
	var client *bq.Client
	var pgTx pgx.Tx
	var sqlTx *sql.Tx
	_, _ = note.EnqueueTx(ctx, client, pgTx, struct{}{})
	_, _ = note.EnqueueTx(ctx, client, sqlTx, struct{}{})
}
