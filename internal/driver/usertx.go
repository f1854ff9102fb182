package driver

import (
	"fmt"
	"reflect"
	"strings"
)

// UserTx is a transaction of the caller's, wrapped by its driver for
// EnqueueTx (postgres.Tx, mysql.Tx, sqlite.Tx): the driver's public
// wrapper embeds it. Only a driver can make one, so what reaches
// EnqueueTx is known to be a pgx.Tx or *sql.Tx of the dialect it names.
type UserTx struct {
	dialect Dialect
	tx      any
}

// WrapUserTx wraps the caller's tx of dialect d.
func WrapUserTx(d Dialect, tx any) UserTx { return UserTx{dialect: d, tx: tx} }

// TxDialect names the database the transaction is on: "postgres",
// "mysql" or "sqlite".
func (t UserTx) TxDialect() string { return string(t.dialect) }

// MadeByPostgresTxMySQLTxOrSQLiteTx does nothing: it marks a
// transaction a bq driver wrapped. bq.Tx requires it, and its name sorts
// before TxDialect, so the compiler's error for a raw pgx.Tx or *sql.Tx
// passed to EnqueueTx ("missing method MadeByPostgresTxMySQLTxOrSQLiteTx")
// names the wrappers to use.
func (t UserTx) MadeByPostgresTxMySQLTxOrSQLiteTx() {}

func (t UserTx) userTx() UserTx { return t }

// UserTxOf unwraps what a driver's Tx returned: the dialect and the raw
// transaction (nil when the driver was given nil, or a nil *sql.Tx). ok
// is false for a value no driver made.
func UserTxOf(v any) (d Dialect, tx any, ok bool) {
	w, ok := v.(interface{ userTx() UserTx })
	if !ok {
		return "", nil, false
	}
	t := w.userTx()
	if isNilPointer(t.tx) {
		return t.dialect, nil, true
	}
	return t.dialect, t.tx, true
}

// isNilPointer reports a nil pointer inside a non-nil interface: a
// failed Open's *postgres.Driver, a nil *sql.Tx.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// UnwrapUserTx is the raw transaction of tx, a transaction of the
// user's wrapped by a driver's Tx for a client on dialect, or the error
// call (the API's name for itself) reports: tx nil, not a driver's
// wrapper, wrapping nil, or another database's.
func UnwrapUserTx(tx any, dialect Dialect, call string) (any, error) {
	plain := strings.TrimSuffix(call, "Tx")
	if tx == nil || isNilPointer(tx) {
		return nil, fmt.Errorf("%s: the transaction is nil: pass your transaction wrapped by its driver (postgres.Tx(tx), mysql.Tx(tx), sqlite.Tx(tx)), or use %s",
			call, plain)
	}
	d, raw, ok := UserTxOf(tx)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: %T is no transaction a bq driver wrapped: pass postgres.Tx(tx), mysql.Tx(tx) or sqlite.Tx(tx)", call, tx)
	case raw == nil:
		return nil, fmt.Errorf("%s: the transaction %s.Tx wraps is nil: begin one on the client's database, or use %s", call, d, plain)
	case dialect != "" && d != dialect:
		return nil, fmt.Errorf("%s: the transaction is %s's (%s.Tx), the client runs on %s: begin it on the client's database", call, d, d, dialect)
	}
	return raw, nil
}
