package driver

import "reflect"

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
