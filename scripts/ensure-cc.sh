#!/usr/bin/env bash
# Makes sure Go can build with cgo: `go test -race` needs cgo, and cgo a C
# compiler and the C library's headers, which a fresh Debian machine lacks.
# When the compiler Go uses ($(go env CC), gcc by default) cannot build a
# C program, it installs gcc and libc6-dev with apt-get (after apt-get
# update), as ensure-databases.sh installs the databases.
#
#   GO  the go command (default go)
set -euo pipefail

tag=ensure-cc
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

# can_compile reports whether compiler $1 builds and links a C program.
can_compile() {
	command -v "$1" >/dev/null 2>&1 || return 1
	local out ok=1
	out="$(mktemp)"
	if printf 'int main(void) { return 0; }\n' | "$1" -x c -o "$out" - >/dev/null 2>&1; then
		ok=0
	fi
	rm -f "$out"
	return "$ok"
}

main() {
	local go="${GO:-go}" cc
	cc="$("$go" env CC 2>/dev/null || true)"
	cc="${cc:-gcc}"
	if ! can_compile "$cc"; then
		[ "$cc" = gcc ] || die "the C compiler Go uses (CC=$cc) cannot build a C program: install it, or unset CC to use gcc"
		log "no working C compiler (go test -race needs cgo): installing gcc and libc6-dev with apt-get"
		apt_install gcc libc6-dev
		can_compile gcc || die "apt-get installed gcc but it still cannot build a C program"
		log "installed $(gcc --version | head -n 1)"
	fi
	if [ "${CGO_ENABLED:-}" = 0 ]; then
		die "CGO_ENABLED=0 is set, but go test -race needs cgo: unset it"
	fi
}

# Sourced (by scripts/scripts_test.go) it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
