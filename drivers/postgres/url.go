package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bqueue/bq/internal/humanize"
)

// ListenDSNParam is the DSN query parameter that gives bq's listener a
// connection of its own, straight to PostgreSQL, while every other
// statement goes through the DSN's host (a pooler such as PgBouncer in
// transaction mode, through which LISTEN does not work):
//
//	postgres://app:pass@pgbouncer:6432/app?default_query_exec_mode=exec&listen_dsn=postgres://db.internal:5432
//
// Its value is a postgres:// URL naming at least a host; what it leaves
// out comes from the DSN: the user and password when it names no user,
// the database when it names none, and every query parameter it does not
// set itself (sslmode, search_path...). A port it leaves out is
// PostgreSQL's default, 5432, not the DSN's (the pooler's). Inside it,
// percent-encode what would otherwise end the DSN's own parameter: & as
// %26, # as %23, + as %2B. bq reads the parameter and never sends it to
// the server; Open refuses one it cannot parse.
const ListenDSNParam = "listen_dsn"

// splitListenDSN takes bq's listen_dsn out of dsn, a postgres:// URL.
// It returns dsn without it, and the listener's connection settings: the
// parameter's URL completed from dsn (nil when dsn has none).
func splitListenDSN(dsn string) (string, *pgx.ConnConfig, error) {
	if !strings.Contains(dsn, ListenDSNParam) {
		return dsn, nil, nil
	}
	if !isURL(dsn) {
		return dsn, nil, nil // pgx reads key=value; Open checks it holds no listen_dsn
	}
	base, query, hasQuery := strings.Cut(dsn, "?")
	if !hasQuery {
		return dsn, nil, nil
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	var kept, values []string
	for _, pair := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == ListenDSNParam {
			values = append(values, value)
			continue
		}
		kept = append(kept, pair)
	}
	if len(values) == 0 {
		return dsn, nil, nil
	}
	rest := base
	if len(kept) > 0 {
		rest += "?" + strings.Join(kept, "&")
	}
	if hasFragment {
		rest += "#" + fragment
	}
	if len(values) > 1 {
		return "", nil, fmt.Errorf("the DSN sets %s %d times: give it once", ListenDSNParam, len(values))
	}
	raw, err := url.QueryUnescape(values[0])
	if err != nil {
		return "", nil, fmt.Errorf("%s=%s is not percent-encoded properly: %v", ListenDSNParam, humanize.RedactDSN(values[0]), err)
	}
	cfg, err := listenConfig(rest, raw)
	if err != nil {
		return "", nil, err
	}
	return rest, cfg, nil
}

// listenConfig is the listener's connection: raw, a listen_dsn, completed
// from dsn (without listen_dsn).
func listenConfig(dsn, raw string) (*pgx.ConnConfig, error) {
	shown := humanize.RedactDSN(raw)
	fix := fmt.Sprintf("write it as %s=postgres://host:5432, the address of PostgreSQL itself (user, password, database and parameters default to the DSN's; percent-encode & # + inside it)", ListenDSNParam)
	if raw == "" {
		return nil, fmt.Errorf("%s is empty: %s", ListenDSNParam, fix)
	}
	l, err := url.Parse(raw)
	if err != nil || !isURL(raw) {
		return nil, fmt.Errorf("%s=%s is not a postgres:// URL: %s", ListenDSNParam, shown, fix)
	}
	if l.Host == "" {
		return nil, fmt.Errorf("%s=%s names no host: %s", ListenDSNParam, shown, fix)
	}
	lq, err := url.ParseQuery(l.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: its parameters: %v (%s)", ListenDSNParam, shown, err, fix)
	}
	if lq.Has(ListenDSNParam) {
		return nil, fmt.Errorf("%s=%s holds a %s of its own: the listener's connection needs none", ListenDSNParam, shown, ListenDSNParam)
	}
	m, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN: %v (expected postgres://user:pass@host:5432/db)", humanize.Redact(err.Error(), humanize.DSNSecrets(dsn)...))
	}
	q, err := url.ParseQuery(m.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL DSN %s: its parameters: %v", humanize.RedactDSN(dsn), err)
	}
	for k, v := range lq {
		q[k] = v
	}
	m.Host = l.Host
	if l.User != nil {
		m.User = l.User
	}
	if strings.Trim(l.Path, "/") != "" {
		m.Path, m.RawPath = l.Path, l.RawPath
	}
	m.RawQuery, m.Fragment, m.RawFragment = q.Encode(), "", ""
	// pgxpool's parser takes the pool's own parameters (pool_max_conns...)
	// out, which pgx's would send to the server.
	cfg, err := pgxpool.ParseConfig(m.String())
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w (%s)", ListenDSNParam, shown, redactParseError(err), fix)
	}
	return cfg.ConnConfig, nil
}

// isURL reports whether dsn is a postgres:// URL rather than libpq's
// key=value form.
func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// execModeParam is pgx's DSN parameter choosing how statements are sent.
const execModeParam = "default_query_exec_mode"

// keyValueExecMode finds execModeParam in libpq's key=value form.
var keyValueExecMode = regexp.MustCompile(`(^|\s)` + execModeParam + `\s*=`)

// setsExecMode reports whether dsn chooses pgx's default_query_exec_mode
// itself (pgx takes the parameter out of the parsed configuration).
func setsExecMode(dsn string) bool {
	if !isURL(dsn) {
		return keyValueExecMode.MatchString(dsn)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return false
	}
	q, _ := url.ParseQuery(u.RawQuery)
	return q.Has(execModeParam)
}

// errKeyValueListen refuses listen_dsn in libpq's key=value form, which
// pgx would send to the server as a setting.
var errKeyValueListen = errors.New(ListenDSNParam + " is read from a postgres:// URL only: write the DSN as postgres://user:pass@host:6432/db?" + ListenDSNParam + "=postgres://host:5432, or give New a pool and ListenWith")
