#!/usr/bin/env bash
# Makes sure headless Chromium is installed for the dashboard's browser
# tests (ui/browser_test.go), installing Debian's chromium package with
# apt-get when it is missing. go test never installs anything: without a
# browser those tests fail and say to run `make test`.
#
#   BQ_CHROMIUM  the browser to use (default /usr/bin/chromium)
set -euo pipefail

chromium="${BQ_CHROMIUM:-/usr/bin/chromium}"
log() { echo "ensure-chromium: $*" >&2; }
die() { echo "ensure-chromium: ERROR: $*" >&2; exit 1; }

if [ -x "$chromium" ]; then
	exit 0
fi
[ -n "${BQ_CHROMIUM:-}" ] && die "BQ_CHROMIUM=$chromium is not an executable"
command -v apt-get >/dev/null 2>&1 ||
	die "Chromium is missing and apt-get is not available: install Chromium and set BQ_CHROMIUM to its path"

as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root to run '$*' (no sudo); install chromium yourself"
	fi
}

log "Chromium is not installed; installing it with apt-get"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
[ -x "$chromium" ] || die "apt-get installed chromium but $chromium is missing"
log "installed $("$chromium" --version 2>/dev/null || echo chromium)"
