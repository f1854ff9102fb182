#!/usr/bin/env bash
# Makes sure the TypeScript client (clients/typescript) builds and its
# tests run: Node.js (18 or later, for `node --test`), the PostgreSQL and
# MySQL drivers and the TypeScript compiler, from Debian's packages
# (node-pg, node-mysql, node-typescript), so no npm registry is needed.
# Installs only what is missing; running it twice does nothing the
# second time.
#
# Debian's node-* packages depend on Debian's nodejs. Where node comes
# from elsewhere (NodeSource's nodejs does not satisfy "nodejs:any"),
# apt-get refuses them; the script then fetches the same packages with
# `apt-get download` and unpacks them into $BQ_NODE_DEPS (default
# /usr/local/lib/bq-node), leaving the installed node alone. `make
# test-typescript` puts $BQ_NODE_DEPS/usr/share/nodejs on NODE_PATH.
#
#   BQ_NODE_DEPS  where the unpacked packages go (default /usr/local/lib/bq-node)
set -euo pipefail

tag=ensure-node-clients
# shellcheck source=scripts/setup-common.sh
. "$(dirname "${BASH_SOURCE[0]}")/setup-common.sh"

# node_major prints the major version of the node on PATH, or nothing.
node_major() {
	local v
	v="$(node --version 2>/dev/null)" || return 0
	v="${v#v}"
	echo "${v%%.*}"
}

deps_dir="${BQ_NODE_DEPS:-/usr/local/lib/bq-node}"
node_path="$deps_dir/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"

# The packages the client needs and, for the unpacked fallback, every
# Debian package they depend on but node itself (node-libpq is pg's
# optional native binding, which the client does not use).
wanted=(node-pg node-mysql node-typescript)
closure=(node-pg node-mysql node-typescript node-async node-bignumber node-core-util-is node-inherits
	node-isarray node-process-nextick-args node-readable-stream node-safe-buffer node-split2
	node-string-decoder node-through2 node-util-deprecate node-xtend)

# has_module reports whether node resolves module $1: Debian installs
# them under /usr/share/nodejs, on node's default path; the fallback
# under $deps_dir.
has_module() { NODE_PATH="$node_path" node -e "require.resolve('$1')" >/dev/null 2>&1; }

# has_tsc reports whether a TypeScript compiler is there.
has_tsc() { command -v tsc >/dev/null 2>&1 || [ -x "$deps_dir/usr/share/nodejs/typescript/bin/tsc" ]; }

# unpack_debs fetches the packages with apt-get download and unpacks
# them into $deps_dir, without installing them.
unpack_debs() {
	local tmp
	tmp="$(mktemp -d)"
	chmod 755 "$tmp" # apt's download user writes here
	(cd "$tmp" && apt-get download "${closure[@]}" >/dev/null 2>&1) || {
		rm -rf "$tmp"
		die "apt-get download ${closure[*]} failed: run apt-get update, or install Debian's nodejs"
	}
	as_root mkdir -p "$deps_dir"
	for f in "$tmp"/*.deb; do
		as_root dpkg-deb -x "$f" "$deps_dir"
	done
	rm -rf "$tmp"
	log "unpacked ${closure[*]} into $deps_dir (node is not Debian's, so apt-get cannot install them)"
}

main() {
	local missing=() major
	major="$(node_major)"
	if [ -z "$major" ]; then
		missing+=(nodejs)
	elif [ "$major" -lt 18 ]; then
		die "node $(node --version) is too old for 'node --test': install Node.js 18 or later"
	fi
	if [ -z "$major" ] || ! has_module pg; then missing+=(node-pg); fi
	if [ -z "$major" ] || ! has_module mysql; then missing+=(node-mysql); fi
	if ! has_tsc; then missing+=(node-typescript); fi
	if [ "${#missing[@]}" -gt 0 ]; then
		log "missing ${missing[*]}; installing with apt-get"
		if [ -n "$major" ] && ! apt-get install -s "${wanted[@]}" >/dev/null 2>&1; then
			as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		fi
		if [ -z "$major" ] || apt-get install -s "${wanted[@]}" >/dev/null 2>&1; then
			apt_install "${missing[@]}"
		else
			unpack_debs
		fi
	fi
	command -v node >/dev/null 2>&1 || die "apt-get ran but node is still missing"
	has_module pg || die "node cannot load the pg module (node-pg)"
	has_module mysql || die "node cannot load the mysql module (node-mysql)"
	has_tsc || die "tsc is still missing (node-typescript)"
	log "node $(node --version); pg, mysql and tsc found"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
