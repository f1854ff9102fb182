#!/usr/bin/env bash
# Makes sure headless Chromium is installed for the dashboard's browser
# tests (ui/browser_test.go), installing Debian's chromium package with
# apt-get when it is missing. go test never installs anything: without a
# browser those tests fail and say to run `make test`.
#
#   BQ_CHROMIUM  the browser to use (default /usr/bin/chromium)
set -euo pipefail

tag=ensure-chromium
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

chromium="${BQ_CHROMIUM:-/usr/bin/chromium}"

if [ -x "$chromium" ]; then
	exit 0
fi
[ -n "${BQ_CHROMIUM:-}" ] && die "BQ_CHROMIUM=$chromium is not an executable"
command -v apt-get >/dev/null 2>&1 ||
	die "Chromium is missing and apt-get is not available: install Chromium and set BQ_CHROMIUM to its path"

log "Chromium is not installed; installing it with apt-get"
apt_install chromium
[ -x "$chromium" ] || die "apt-get installed chromium but $chromium is missing"
log "installed $("$chromium" --version 2>/dev/null || echo chromium)"
