# shellcheck shell=bash
# Shared by the ensure-*.sh scripts (sourced, not run): logging, running
# as root, and the markers that record what these scripts installed.
#
#   BQ_SETUP_STATE  where the markers live (default /var/lib/bq-test-setup)
#
# A marker says "this script installed that server": only on such a
# server, a throwaway test server of this machine, do the scripts loosen
# authentication (pg_hba.conf trust, a passwordless root@127.0.0.1). A
# server that was there before is never reconfigured.

# The sourcing script sets $tag (its name, for messages).
state_dir="${BQ_SETUP_STATE:-/var/lib/bq-test-setup}"

log() { echo "${tag:?}: $*" >&2; }
die() {
	echo "${tag:?}: ERROR: $*" >&2
	exit 1
}

# as_root runs a command as root, through sudo when we are not root.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root to run '$*' (no sudo); do it yourself"
	fi
}

# apt_install installs Debian packages, refreshing the package lists
# first: a fresh machine's lists are empty or stale.
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get is not available to install $*: install it yourself"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# mark_installed records that this script installed server $1.
mark_installed() {
	as_root mkdir -p "$state_dir"
	as_root touch "$state_dir/$1-installed"
	log "installed $1 (marker $state_dir/$1-installed): its authentication may be loosened for the tests"
}

# installed_here reports whether these scripts installed server $1.
installed_here() { [ -e "$state_dir/$1-installed" ]; }
