#!/usr/bin/env bash
# Lists the files one keyed job's path runs, from Enqueue to its release
# (see main.go): bench/jobpath/run.sh DSN
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
dsn="${1:?usage: bench/jobpath/run.sh DSN}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
go build -cover -covermode=atomic -coverpkg=./... -o "$out/jobpath" ./bench/jobpath
mkdir -p "$out/x"
GOCOVERDIR="$out/x" "$out/jobpath" "$dsn" "$out" >/dev/null 2>&1
for d in before after; do go tool covdata textfmt -i="$out/$d" -o="$out/$d.txt"; done
# A block is on the path when its count grew between the two snapshots.
awk 'FNR==1 { next }
	FILENAME ~ /before/ { b[$1] += $3; next }
	{ a[$1] += $3 }
	END { for (k in a) if (a[k] > b[k]) { split(k, parts, ":"); n[parts[1]]++ } for (file in n) print n[file], file }' \
	"$out/before.txt" "$out/after.txt" | sed 's#github.com/bqueue/bq/##' | grep -v '^[0-9]* bench/jobpath/' | sort -k2 |
	awk '{ print; files++; pkg = $2; sub("/[^/]*$", "", pkg); if (pkg == $2) pkg = "."; pk[pkg] = 1 }
		END { n = 0; for (q in pk) n++; printf "%d files in %d packages\n", files, n }'
