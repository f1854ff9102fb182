#!/usr/bin/env bash
# Makes sure the pgbouncer binary is installed, for the tests that run bq
# through PgBouncer in transaction mode (internal/pgbouncer): each starts
# a PgBouncer of its own on a private port, its configuration and logs in
# a temporary directory, in front of the shared PostgreSQL, and stops it
# at the end. This script only installs Debian's pgbouncer package with
# apt-get when the binary is missing; it configures and starts nothing.
# Nothing to do when BQ_TEST_DRIVERS leaves PostgreSQL out. Without
# pgbouncer afterwards it fails: the tests are never silently skipped.
#
#   BQ_PGBOUNCER  the binary to use (default: pgbouncer on PATH, else
#                 /usr/sbin/pgbouncer)
set -euo pipefail

tag=ensure-pgbouncer
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

drivers="${BQ_TEST_DRIVERS:-sqlite,postgres,mysql}"

# pgbouncer_bin prints the binary the tests will run, or nothing.
pgbouncer_bin() {
	if [ -n "${BQ_PGBOUNCER:-}" ]; then
		echo "$BQ_PGBOUNCER"
	elif command -v pgbouncer >/dev/null 2>&1; then
		command -v pgbouncer
	elif [ -x /usr/sbin/pgbouncer ]; then
		echo /usr/sbin/pgbouncer
	fi
}

# runs reports whether the binary answers --version.
runs() {
	local bin
	bin="$(pgbouncer_bin)"
	[ -n "$bin" ] && "$bin" --version >/dev/null 2>&1
}

version() { "$(pgbouncer_bin)" --version 2>/dev/null | head -n 1; }

main() {
	[[ ",${drivers// /}," == *",postgres,"* ]] || return 0
	if runs; then
		log "$(version)"
		return 0
	fi
	[ -z "${BQ_PGBOUNCER:-}" ] || die "BQ_PGBOUNCER=$BQ_PGBOUNCER does not run (--version failed)"
	command -v apt-get >/dev/null 2>&1 ||
		die "pgbouncer is missing and apt-get is not available: install PgBouncer 1.18+ and set BQ_PGBOUNCER to its path"
	log "pgbouncer is missing; installing it with apt-get"
	apt_install pgbouncer
	runs || die "apt-get installed pgbouncer but it still does not run (looked on PATH and at /usr/sbin/pgbouncer)"
	log "installed $(version)"
}

# Sourced (by scripts/scripts_test.go) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
