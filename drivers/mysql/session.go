package mysql

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// checkedConnector hands the pool only connections whose session is safe
// for client-side parameter interpolation. checkCharset reads the URL; the
// session's character set may still come from elsewhere: the server's
// default where it ignores the client's handshake
// (skip-character-set-client-handshake) and the URL names a collation but
// no charset (no SET NAMES follows), init_connect, or a parameter spelled
// in a way no URL check foresaw. So each new connection reads its own
// @@session.character_set_client and is refused, closed, unless it is a
// set in which an escaping backslash cannot end a character. The check is
// one query per new connection, not per statement.
//
// NO_BACKSLASH_ESCAPES in sql_mode needs nothing here: the server reports
// it in every reply's status flags and go-sql-driver then escapes a quote
// by doubling it instead (measured: TestSessionCheckOnServer).
type checkedConnector struct {
	sqldriver.Connector
}

func (c checkedConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkSession(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// errSessionCharset marks a connection refused for its session's
// character set.
var errSessionCharset = errors.New("unsafe session character set")

// checkSession reads the connection's client character set and refuses
// one unsafe with interpolation.
func checkSession(ctx context.Context, conn sqldriver.Conn) error {
	q, ok := conn.(sqldriver.QueryerContext)
	if !ok {
		return fmt.Errorf("check the MySQL session's character set: the connection (%T) cannot run a query", conn)
	}
	rows, err := q.QueryContext(ctx, "SELECT @@session.character_set_client", nil)
	if err != nil {
		return fmt.Errorf("check the MySQL session's character set: %w", err)
	}
	defer rows.Close()
	dest := make([]sqldriver.Value, 1)
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			err = errors.New("no row")
		}
		return fmt.Errorf("check the MySQL session's character set: %w", err)
	}
	var charset string
	switch v := dest[0].(type) {
	case []byte:
		charset = string(v)
	case string:
		charset = v
	default:
		return fmt.Errorf("check the MySQL session's character set: read %T", v)
	}
	if cs := normalName(charset); !interpolationSafe[cs] {
		return fmt.Errorf("%w: the session's character_set_client is %s after connecting (from the server's default, "+
			"init_connect or the URL), which is unsafe with client-side parameter interpolation: in big5, cp932, gb18030, "+
			"gbk and sjis a backslash byte can end a character, so an escaped quote in a parameter ends its string "+
			"literal (SQL injection); add charset=utf8mb4 to the URL (set with SET NAMES after connecting, whatever "+
			"the server's default), or interpolateParams=false to keep %s with server-side prepared statements",
			errSessionCharset, cs, cs)
	}
	return nil
}
