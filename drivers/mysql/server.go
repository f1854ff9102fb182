package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

func serverVersion(ctx context.Context, db *sql.DB) (string, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", fmt.Errorf("read server version: %w", err)
	}
	return version, nil
}

// serverKind is a server's family and version.
type serverKind struct {
	mariaDB      bool
	major, minor int
}

func (s serverKind) atLeast(major, minor int) bool {
	return s.major > major || s.major == major && s.minor >= minor
}

// isolationVariable names the session variable holding the default
// isolation: MySQL dropped tx_isolation in 8.0, MariaDB added
// transaction_isolation only in 11.1.
func (s serverKind) isolationVariable() string {
	if s.mariaDB && !s.atLeast(11, 1) {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

var versionPattern = regexp.MustCompile(`^(\d+)\.(\d+)`)

// checkVersion parses SELECT VERSION() ("8.0.36", "10.11.6-MariaDB-1")
// and refuses servers older than bq needs: MySQL 8.0 (SKIP LOCKED,
// descending indexes, a persistent AUTO_INCREMENT counter) and MariaDB
// 10.6 (SKIP LOCKED).
func checkVersion(version string) (serverKind, error) {
	var s serverKind
	// MariaDB's handshake once prefixed "5.5.5-" for old clients.
	m := versionPattern.FindStringSubmatch(strings.TrimPrefix(version, "5.5.5-"))
	if m == nil {
		return s, fmt.Errorf("cannot read the server version %q: bq needs MySQL 8.0+ or MariaDB 10.6+", version)
	}
	s.major, _ = strconv.Atoi(m[1])
	s.minor, _ = strconv.Atoi(m[2])
	s.mariaDB = strings.Contains(strings.ToLower(version), "mariadb")
	switch {
	case s.mariaDB && !s.atLeast(10, 6):
		return s, fmt.Errorf("the server runs MariaDB %s; bq needs MariaDB 10.6 or newer (FOR UPDATE SKIP LOCKED): upgrade the server", version)
	case !s.mariaDB && !s.atLeast(8, 0):
		return s, fmt.Errorf("the server runs MySQL %s; bq needs MySQL 8.0 or newer (FOR UPDATE SKIP LOCKED): upgrade the server", version)
	}
	return s, nil
}
