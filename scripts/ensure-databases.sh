#!/usr/bin/env bash
# Makes sure every database the tests use is reachable, installing and
# starting local servers where needed. BQ_TEST_DRIVERS (comma list;
# default "sqlite,postgres,mysql") selects them. A selected database that stays
# unreachable fails this script: the tests are never silently skipped.
#
#   BQ_TEST_POSTGRES_DSN  default postgres://postgres@127.0.0.1:5432/test?sslmode=disable
#
# When BQ_TEST_POSTGRES_DSN names a server of your own, the script only
# checks that it answers; it manages the local server only for the default.
set -euo pipefail

DEFAULT_PG_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
drivers="${BQ_TEST_DRIVERS:-sqlite,postgres,mysql}"
pg_dsn="${BQ_TEST_POSTGRES_DSN:-$DEFAULT_PG_DSN}"

log() { echo "ensure-databases: $*" >&2; }
die() { echo "ensure-databases: ERROR: $*" >&2; exit 1; }

# as_root runs a command as root, through sudo when we are not root.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root to run '$*' (no sudo); install and start the database yourself"
	fi
}

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2 >/dev/null 2>&1; }

# newest_pg_version prints the newest PostgreSQL major version configured.
newest_pg_version() {
	ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1
}

install_postgres() {
	log "PostgreSQL is not installed; installing it with apt-get"
	command -v apt-get >/dev/null 2>&1 ||
		die "PostgreSQL is not installed and apt-get is not available: install PostgreSQL, or point BQ_TEST_POSTGRES_DSN at a server"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	local v hba
	v="$(newest_pg_version)"
	[ -n "$v" ] || die "apt-get installed PostgreSQL but /etc/postgresql is empty"
	# A fresh install asks for passwords over TCP; the tests connect as
	# postgres without one, so trust local connections (this machine's
	# throwaway test server only).
	hba="/etc/postgresql/$v/main/pg_hba.conf"
	if [ -f "$hba" ] && ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
		log "trusting local TCP connections in $hba"
		as_root sed -i -E 's/^(local|host)(\s+.*\s+)(peer|md5|scram-sha-256)\s*$/\1\2trust/' "$hba"
	fi
}

start_postgres() {
	local v
	v="$(newest_pg_version)"
	[ -n "$v" ] || die "no PostgreSQL cluster is configured under /etc/postgresql"
	if [ ! -d "/etc/postgresql/$v/main" ]; then
		log "creating PostgreSQL $v cluster 'main'"
		as_root pg_createcluster "$v" main
	fi
	log "starting PostgreSQL $v cluster 'main'"
	as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
	# A cluster that was already running reloads its pg_hba.conf.
	as_root pg_ctlcluster --skip-systemctl-redirect "$v" main reload >/dev/null 2>&1 || true
	for _ in $(seq 1 30); do
		pg_up && return 0
		sleep 1
	done
	die "PostgreSQL $v did not accept connections on 127.0.0.1:5432 within 30s (see /var/log/postgresql/)"
}

ensure_postgres() {
	if [ "$pg_dsn" != "$DEFAULT_PG_DSN" ]; then
		# A server of the caller's: check it answers, change nothing.
		if command -v psql >/dev/null 2>&1; then
			psql "$pg_dsn" -qtAc 'SELECT 1' >/dev/null ||
				die "PostgreSQL at BQ_TEST_POSTGRES_DSN does not answer (see the psql error above)"
		fi
		log "PostgreSQL: using BQ_TEST_POSTGRES_DSN"
		return 0
	fi
	if ! pg_up; then
		if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(newest_pg_version)" ]; then
			install_postgres
		fi
		start_postgres
	fi
	pg_up || die "PostgreSQL is not accepting connections on 127.0.0.1:5432"
	local has
	has="$(psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -qtAc "SELECT 1 FROM pg_database WHERE datname = 'test'")" ||
		die "cannot connect to PostgreSQL as user postgres without a password: trust local connections in pg_hba.conf, or set BQ_TEST_POSTGRES_DSN"
	if [ "$has" != "1" ]; then
		log "creating database 'test'"
		psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -qc 'CREATE DATABASE test' ||
			die "could not create database 'test'"
	fi
	log "PostgreSQL: ready at 127.0.0.1:5432, database test"
}

# MySQL / MariaDB: scripts/ensure-mariadb.sh starts or installs the local
# server (or checks BQ_TEST_MYSQL_DSN's) and fails loudly otherwise.
ensure_mysql() {
	"$(dirname "${BASH_SOURCE[0]}")/ensure-mariadb.sh"
}

IFS=',' read -r -a selected <<<"$drivers"
for d in "${selected[@]}"; do
	d="${d// /}"
	case "$d" in
	sqlite) log "SQLite: embedded, nothing to start" ;;
	postgres) ensure_postgres ;;
	mysql | mariadb) ensure_mysql ;;
	"") ;;
	*) die "BQ_TEST_DRIVERS names '$d'; known: sqlite, postgres, mysql" ;;
	esac
done
