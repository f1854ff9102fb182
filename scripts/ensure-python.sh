#!/usr/bin/env bash
# Makes sure a python3 with what the Python client's tests and the
# conformance suite's Python producers need is installed (psycopg 3,
# PyMySQL, pytest; sqlite3 is in the standard library), installing
# Debian's packages with apt-get when none is, and prints that
# interpreter's path on stdout (the Makefile passes it on as BQ_PYTHON).
# It fails when there is none afterwards: the tests are never silently
# skipped.
#
#   BQ_PYTHON  the interpreter to use (default: python3 on PATH, else
#              /usr/bin/python3, whichever has the modules)
set -euo pipefail

tag=ensure-python
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

modules="import sqlite3, psycopg, pymysql, pytest"

# pick prints the first candidate that imports the modules.
pick() {
	local c
	for c in ${BQ_PYTHON:-} python3 /usr/bin/python3; do
		if command -v "$c" >/dev/null 2>&1 && "$c" -c "$modules" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if py="$(pick)"; then
	echo "$py"
	exit 0
fi
log "no python3 with psycopg 3, PyMySQL and pytest: installing Debian's python3-psycopg python3-pymysql python3-pytest"
apt_install python3 python3-psycopg python3-pymysql python3-pytest
if py="$(pick)"; then
	log "using $py"
	echo "$py"
	exit 0
fi
die "still no python3 that imports psycopg, pymysql and pytest: install them (pip install 'psycopg[binary]' PyMySQL pytest) and set BQ_PYTHON"
