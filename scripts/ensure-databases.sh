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
# It trusts local connections in pg_hba.conf only on a server it installed
# itself (see setup-common.sh): a PostgreSQL that was there before keeps
# its authentication, and the script says what to do if the tests cannot
# log in.
set -euo pipefail

tag=ensure-databases
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

DEFAULT_PG_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
PG_PORT=5432
pg_etc=/etc/postgresql
drivers="${BQ_TEST_DRIVERS:-sqlite,postgres,mysql}"
pg_dsn="${BQ_TEST_POSTGRES_DSN:-$DEFAULT_PG_DSN}"

pg_up() { pg_isready -q -h 127.0.0.1 -p "$PG_PORT" -t 2 >/dev/null 2>&1; }
pg_sql() { psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qtAc "$1"; }

# newest_pg_version prints the newest PostgreSQL major version configured
# (sort -V: 9.6 before 10).
newest_pg_version() {
	find "$pg_etc" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V | tail -n 1
}

# port_cluster prints "version name" of the cluster configured on
# $PG_PORT, the newest version if several are (pg_lsclusters).
port_cluster() {
	pg_lsclusters --no-header 2>/dev/null | awk -v port="$PG_PORT" '$3 == port { print $1, $2 }' | sort -V | tail -n 1
}

install_postgres() {
	log "PostgreSQL is not installed; installing it with apt-get"
	apt_install postgresql
	[ -n "$(newest_pg_version)" ] || die "apt-get installed PostgreSQL but $pg_etc is empty"
	mark_installed postgresql
}

# trust_local rewrites pg_hba.conf of cluster "$1 $2" to trust local
# connections, as the tests connect (postgres, no password). Only for a
# server this script installed: the machine's throwaway test server.
trust_local() {
	local hba="$pg_etc/$1/$2/pg_hba.conf"
	installed_here postgresql || die "refusing to change $hba: this script did not install this PostgreSQL"
	[ -f "$hba" ] || return 0
	if ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$hba"; then
		log "trusting local connections in $hba (a server this script installed)"
		as_root sed -i -E 's/^(local|host)(\s+.*\s+)(peer|md5|scram-sha-256)\s*$/\1\2trust/' "$hba"
	fi
	as_root pg_ctlcluster --skip-systemctl-redirect "$1" "$2" reload >/dev/null 2>&1 || true
}

start_postgres() {
	local cluster v name
	cluster="$(port_cluster)"
	if [ -z "$cluster" ]; then
		v="$(newest_pg_version)"
		[ -n "$v" ] || die "no PostgreSQL is configured under $pg_etc"
		log "creating PostgreSQL $v cluster 'main' on port $PG_PORT"
		as_root pg_createcluster --port "$PG_PORT" "$v" main
		cluster="$v main"
	fi
	read -r v name <<<"$cluster"
	if installed_here postgresql; then
		trust_local "$v" "$name"
	fi
	log "starting PostgreSQL $v cluster '$name' (port $PG_PORT)"
	as_root pg_ctlcluster --skip-systemctl-redirect "$v" "$name" start || true
	for _ in $(seq 1 30); do
		pg_up && return 0
		sleep 1
	done
	die "PostgreSQL $v did not accept connections on 127.0.0.1:$PG_PORT within 30s (see /var/log/postgresql/)"
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
	pg_up || die "PostgreSQL is not accepting connections on 127.0.0.1:$PG_PORT"
	local has
	if ! has="$(pg_sql "SELECT 1 FROM pg_database WHERE datname = 'test'")"; then
		local cluster
		cluster="$(port_cluster)"
		if ! installed_here postgresql || [ -z "$cluster" ]; then
			die "cannot connect to PostgreSQL as user postgres without a password, and this script did not install this server, so it leaves its pg_hba.conf alone: trust 127.0.0.1 for user postgres yourself, or set BQ_TEST_POSTGRES_DSN"
		fi
		# shellcheck disable=SC2086 # "version name"
		trust_local $cluster
		has="$(pg_sql "SELECT 1 FROM pg_database WHERE datname = 'test'")" ||
			die "cannot connect to PostgreSQL as user postgres without a password, even after trusting local connections"
	fi
	if [ "$has" != "1" ]; then
		log "creating database 'test'"
		pg_sql 'CREATE DATABASE test' || die "could not create database 'test'"
	fi
	log "PostgreSQL: ready at 127.0.0.1:$PG_PORT, database test"
}

# MySQL / MariaDB: scripts/ensure-mariadb.sh starts or installs the local
# server (or checks BQ_TEST_MYSQL_DSN's) and fails loudly otherwise.
ensure_mysql() {
	"$(dirname "${BASH_SOURCE[0]}")/ensure-mariadb.sh"
}

main() {
	local selected d
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
}

# Sourced (by scripts/scripts_test.go) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
