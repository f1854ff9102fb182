// Package snippet is what the prose around the documentation's Go
// fragments takes for granted: the context, the client, a transaction,
// the job kinds the examples enqueue and the application's own
// functions they call. TestDocSnippets gives a fragment the declarations
// of this file that it uses and does not declare itself (the methods of
// a type come with it). Keep the names here the ones the documents use,
// and every declaration plain: a fragment's own declaration of a name
// replaces this file's.
package snippet

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The values a fragment runs with.
var (
	ctx    context.Context
	client *bq.Client
	dsn    string
	id     int64 // a job's id
	jobID  int64
	t      *testing.T // in a test
	args   ChargeArgs // what Charge is enqueued with
	items  []bq.Item

	pool  *pgxpool.Pool // the application's PostgreSQL pool
	tx    pgx.Tx        // its transaction on PostgreSQL
	db    *sql.DB       // its database on SQLite or MySQL
	sqlTx *sql.Tx       // its transaction there

	mux      *http.ServeMux
	token    string
	traceID  string
	exporter sdktrace.SpanExporter
	nightly  *bq.PeriodicJob
	order    Order
)

// The job kinds the examples enqueue. An args type has every field some
// example uses.

type ChargeArgs struct {
	OrderID int64
	Cents   int64
}

var Charge = bq.Define("billing.charge", charge, bq.JobOptions[ChargeArgs]{})

func charge(ctx context.Context, a ChargeArgs) error { return nil }

type ExportArgs struct {
	ReportID int64
	Tenant   string
	Full     bool
	ID       string
	GiveUpAt time.Time
}

var Export = bq.Define("reports.export", export, bq.JobOptions[ExportArgs]{})

func export(ctx context.Context, a ExportArgs) error { return nil }

type WelcomeArgs struct{ Email string }

var Welcome = bq.Define("mail.welcome", welcome, bq.JobOptions[WelcomeArgs]{})

func welcome(ctx context.Context, a WelcomeArgs) error { return nil }

type ReceiptArgs struct{ OrderID int64 }

var Receipt = bq.Define("mail.receipt", receipt, bq.JobOptions[ReceiptArgs]{})

func receipt(ctx context.Context, a ReceiptArgs) error { return nil }

type ReportArgs struct{ Day string }

var Report = bq.Define("reports.nightly", nightlyReport, bq.JobOptions[ReportArgs]{})

func nightlyReport(ctx context.Context, a ReportArgs) error { return nil }

type SyncArgs struct {
	Account                    int64
	TenantID, Provider, Region string
}

var Sync = bq.Define("crm.sync", syncAccount, bq.JobOptions[SyncArgs]{})

func syncAccount(ctx context.Context, a SyncArgs) error { return nil }

func sync(ctx context.Context, a SyncArgs) error { return nil }

type CallArgs struct{ AccountID string }

var CallAPI = bq.Define("api.call", call, bq.JobOptions[CallArgs]{})

func call(ctx context.Context, a CallArgs) error { return nil }

// The application's own code.

type Order struct{ ID int64 }

// signUp and createOrder are the code under test of docs/testing.md.
func signUp(ctx context.Context, client *bq.Client, email string) error { return nil }

func createOrder(ctx context.Context, client *bq.Client, more ...any) error { return nil }

func show(jobs []*bq.JobInfo) {}

func exportReady(ctx context.Context, id string) (bool, error) { return false, nil }

func fetchExport(ctx context.Context, id string) error { return nil }

func tenantFrom(ctx context.Context) string { return "" }

func requireAdmin(h http.Handler) http.Handler { return h }

var (
	ErrNotFound    = errors.New("not found")
	ErrRateLimited = errors.New("rate limited")
)

// reporter is an error handler (Config.ErrorHandler).
type reporter struct{}

func (reporter) HandleError(ctx context.Context, job bq.JobMeta, err error) bq.ErrorAction {
	return bq.ErrorAction{}
}

func (reporter) HandlePanic(ctx context.Context, job bq.JobMeta, v any, stack string) bq.ErrorAction {
	return bq.ErrorAction{}
}
