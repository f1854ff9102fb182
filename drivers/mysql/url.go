package mysql

import (
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/bqueue/bq/internal/humanize"
)

// ParseURL turns a mysql:// URL into a go-sql-driver configuration:
//
//	mysql://user:pass@host:3306/db?param=value&...
//
// Query parameters are go-sql-driver's DSN parameters and session
// variables, passed on as they are. Unless the URL sets them, bq adds
// parseTime=true, loc=UTC, time_zone='+00:00' (times are stored as Unix
// microseconds, so these only keep ad-hoc date functions honest),
// interpolateParams=true (one round trip per statement instead of three),
// charset=utf8mb4 with collation=utf8mb4_general_ci, and the session
// bounds innodb_lock_wait_timeout and wait_timeout (see the package
// documentation; Open picks the right ones for the server).
//
// With interpolation on, a character set in which a backslash byte can
// end a multibyte character (big5, cp932, gb18030, gbk, sjis: escaping
// would let a parameter out of its string literal) is refused, whether
// named by charset, collation or character_set_client; use utf8mb4, or
// interpolateParams=false to keep such a set.
func ParseURL(rawURL string) (*gomysql.Config, error) {
	cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	setBounds(cfg.Params, nil)
	return cfg, nil
}

// parseURL is ParseURL without the session bounds, which depend on the
// server.
func parseURL(rawURL string) (*gomysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %v (expected mysql://user:pass@host:3306/db)", redactErr(err))
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("parse MySQL DSN: scheme %q, want mysql:// (mysql://user:pass@host:3306/db)", u.Scheme)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("parse MySQL DSN %s: name one database, as in mysql://user:pass@host:3306/db", humanize.RedactDSN(rawURL))
	}
	if err := checkCharset(u.Query()); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	// go-sql-driver sends a parameter it does not know as a session SET:
	// ?password=x (or ?PASSWORD=x: the server ignores the case) would be
	// `SET password = x`, changing the account's password rather than
	// giving it.
	for name := range u.Query() {
		if n := strings.ToLower(name); n == "password" || n == "passwd" {
			return nil, fmt.Errorf("parse MySQL DSN %s: a password belongs in the URL's user part (mysql://user:pass@host:3306/db), not in ?%s=, which the server would take as SET password",
				humanize.RedactDSN(rawURL), name)
		}
	}
	// go-sql-driver parses its own parameters (timeout, tls, ...) and
	// keeps the rest as session variables, whose names bq lowercases.
	cfg, err := gomysql.ParseDSN("/?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	if cfg.Params, err = sessionVariables(cfg.Params); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	if u.Hostname() == "" {
		cfg.Addr = "127.0.0.1" + strings.TrimPrefix(cfg.Addr, u.Host)
	}
	cfg.DBName = db
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	q := u.Query()
	if !q.Has("parseTime") {
		cfg.ParseTime = true
	}
	if !q.Has("loc") {
		cfg.Loc = time.UTC
	}
	if !q.Has("interpolateParams") {
		cfg.InterpolateParams = true
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	if _, ok := cfg.Params["time_zone"]; !ok {
		cfg.Params["time_zone"] = "'+00:00'"
	}
	if err := setDefaultCharset(cfg, q); err != nil {
		return nil, fmt.Errorf("parse MySQL DSN %s: %w", humanize.RedactDSN(rawURL), err)
	}
	return cfg, nil
}

// DSN returns the go-sql-driver data source name for a mysql:// URL, with
// the settings ParseURL adds, for a *sql.DB of your own for New; give
// that pool SetConnMaxIdleTime(ConnMaxIdleTime): its sessions carry
// wait_timeout = TxIdleTimeout unless the URL sets it. A pool opened from
// it does not check each session's character set as Connector's does:
// prefer Connector.
func DSN(rawURL string) (string, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// Connector returns a connector for a mysql:// URL (see ParseURL) for a
// *sql.DB of your own, sql.OpenDB(connector), to give New. Prefer it to
// DSN: with parameter interpolation on, each connection it makes reads
// its session's character set and is refused unless it is safe, whatever
// set it (the URL, init_connect, or a server default that ignores the
// client's handshake). Give the pool SetConnMaxIdleTime(ConnMaxIdleTime)
// as with DSN.
func Connector(rawURL string) (sqldriver.Connector, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return newConnector(cfg)
}

// newConnector is go-sql-driver's connector for cfg, each of whose
// connections is checked (checkedConnector) when cfg interpolates.
func newConnector(cfg *gomysql.Config) (sqldriver.Connector, error) {
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open MySQL pool: %w", err)
	}
	if !cfg.InterpolateParams {
		return conn, nil
	}
	return checkedConnector{conn}, nil
}

// redactErr keeps the URL, and with it any password, out of a url.Parse
// error.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
