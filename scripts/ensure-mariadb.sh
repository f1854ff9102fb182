#!/usr/bin/env bash
# Makes sure the MariaDB server the MySQL tests use is reachable at
# 127.0.0.1:3306 as root without a password, with a database `test`
# (BQ_TEST_MYSQL_DSN's default, mysql://root@127.0.0.1:3306/test):
#
#   reachable (mysqladmin ping)  -> nothing to do
#   installed but down           -> start /usr/sbin/mariadbd
#   not installed                -> apt-get install -y mariadb-server, start it
#   then                         -> create database test if missing
#
# Anything else fails loudly: the tests are never silently skipped. When
# BQ_TEST_MYSQL_DSN names a server of your own, the script changes nothing
# (the test harness fails, naming the address, if it does not answer).
# It creates root@127.0.0.1 without a password only on a server it
# installed itself (see setup-common.sh); on any other it says what to do.
#
# Run by scripts/ensure-databases.sh for BQ_TEST_DRIVERS=mysql.
set -euo pipefail

tag=ensure-mariadb
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

DEFAULT_MYSQL_DSN='mysql://root@127.0.0.1:3306/test'
mysql_dsn="${BQ_TEST_MYSQL_DSN:-$DEFAULT_MYSQL_DSN}"
MARIADBD=/usr/sbin/mariadbd

admin() { mysqladmin -h127.0.0.1 -P3306 -uroot --connect-timeout=2 "$@"; }
up() { admin ping >/dev/null 2>&1; }
sql() { mysql -h127.0.0.1 -P3306 -uroot --connect-timeout=5 -NBe "$1"; }

install_mariadb() {
	log "MariaDB is not installed; installing mariadb-server with apt-get"
	command -v apt-get >/dev/null 2>&1 ||
		die "MariaDB is not installed and apt-get is not available: install MariaDB 10.6+ (or MySQL 8.0+), or point BQ_TEST_MYSQL_DSN at a server"
	# The package may try to start the server through an init system the
	# machine does not have; start_mariadb starts it either way.
	apt_install mariadb-server || [ -x "$MARIADBD" ] || die "apt-get install mariadb-server failed"
	[ -x "$MARIADBD" ] || die "apt-get installed mariadb-server but $MARIADBD is missing"
	mark_installed mariadb
}

start_mariadb() {
	log "starting $MARIADBD"
	# The socket directory lives on a tmpfs that a reboot empties.
	as_root install -d -o mysql -g mysql -m 0755 /run/mysqld 2>/dev/null || true
	as_root start-stop-daemon --start --oknodo --background --exec "$MARIADBD" -- --user=mysql
	for _ in $(seq 1 30); do
		up && return 0
		sleep 1
	done
	die "MariaDB did not answer on 127.0.0.1:3306 within 30s (is another server on the port? see 'journalctl' or /var/log/mysql/)"
}

# allow_root_tcp lets root in over TCP without a password, as the tests
# connect; a fresh Debian install admits root only through the socket.
# Only on a server this script installed: the machine's throwaway test
# server.
allow_root_tcp() {
	sql 'SELECT 1' >/dev/null 2>&1 && return 0
	installed_here mariadb ||
		die "cannot connect to MariaDB as root from 127.0.0.1 without a password, and this script did not install this server, so it creates no such user: create one that may create databases and point BQ_TEST_MYSQL_DSN at it"
	log "letting root connect from 127.0.0.1 without a password (a server this script installed)"
	as_root mysql --protocol=socket -uroot -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" ||
		die "cannot connect to MariaDB as root, over TCP or the socket: set BQ_TEST_MYSQL_DSN to a user that may create databases"
	sql 'SELECT 1' >/dev/null || die "root still cannot connect from 127.0.0.1 without a password"
}

main() {
	if [ "$mysql_dsn" != "$DEFAULT_MYSQL_DSN" ]; then
		log "MySQL: using BQ_TEST_MYSQL_DSN (a server of your own; nothing to manage)"
		return 0
	fi
	command -v mysqladmin >/dev/null 2>&1 || [ ! -x "$MARIADBD" ] ||
		die "$MARIADBD is installed but mysqladmin is not: install mariadb-client"
	if ! up; then
		if [ ! -x "$MARIADBD" ]; then
			install_mariadb
		fi
		start_mariadb
	fi
	up || die "MariaDB is not answering on 127.0.0.1:3306"
	allow_root_tcp
	version="$(sql 'SELECT VERSION()')" || die "cannot query the server version"
	has="$(sql "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = 'test'")" ||
		die "cannot list databases as root"
	if [ "$has" != "1" ]; then
		log "creating database 'test'"
		sql 'CREATE DATABASE test CHARACTER SET utf8mb4' || die "could not create database 'test'"
	fi
	log "MySQL: MariaDB $version ready at 127.0.0.1:3306, database test"
}

# Sourced (by scripts/scripts_test.go) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
