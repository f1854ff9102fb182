#!/usr/bin/env bash
# Makes sure pgbench runs, for `make bench`'s PostgreSQL ceiling
# (bench/ceiling). Debian and Ubuntu ship pgbench in the server package
# postgresql-<major>, not in the client: the script installs the one of the
# server's major version (any pgbench speaks to any server; the same
# version keeps the scripts' behaviour), else postgresql-contrib.
# Nothing to do when BQ_TEST_DRIVERS leaves PostgreSQL out.
set -euo pipefail

tag=ensure-pgbench
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

drivers="${BQ_TEST_DRIVERS:-sqlite,postgres,mysql}"
pg_dsn="${BQ_TEST_POSTGRES_DSN:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"

# server_major prints the major version of the server at $pg_dsn, or
# nothing if psql cannot tell.
server_major() {
	local num
	num="$(psql "$pg_dsn" -qtAc 'SHOW server_version_num' 2>/dev/null)" || return 0
	[[ "$num" =~ ^[0-9]+$ ]] && echo $((num / 10000))
}

main() {
	[[ ",${drivers// /}," == *",postgres,"* ]] || return 0
	if pgbench --version >/dev/null 2>&1; then
		log "pgbench: $(pgbench --version)"
		return 0
	fi
	local major pkg=postgresql-contrib
	major="$(server_major)"
	if [ -n "$major" ]; then
		pkg="postgresql-$major"
	fi
	log "pgbench is missing; installing $pkg with apt-get"
	apt_install "$pkg"
	pgbench --version >/dev/null 2>&1 || die "apt-get installed $pkg but pgbench still does not run"
	log "pgbench: $(pgbench --version)"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
