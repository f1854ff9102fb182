"""A Python producer for the conformance suite (inbox_test.go): enqueues
jobs with bqueue (clients/python) into the database of a Go DSN, in
transactions of a few jobs each, one in five rolled back, racing the Go
producers on the same keys. Prints one JSON line per row it wrote:
{"id", "kind", "key", "seq", "rolled_back"}.

    python3 inbox_producer.py DSN TEST PRODUCER PER_KEY
"""

import json
import os
import sqlite3
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "clients", "python"))
import bqueue  # noqa: E402


def connect(dsn: str):
    u = urllib.parse.urlsplit(dsn)
    if u.scheme == "sqlite":
        return sqlite3.connect(u.path, timeout=60)
    query = dict(urllib.parse.parse_qsl(u.query))
    if u.scheme in ("postgres", "postgresql"):
        import psycopg

        schema = query.pop("search_path", None)
        url = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, urllib.parse.urlencode(query), ""))
        return psycopg.connect(url, options=f"-c search_path={schema}" if schema else None)
    if u.scheme == "mysql":
        import pymysql

        return pymysql.connect(host=u.hostname, port=u.port or 3306, user=urllib.parse.unquote(u.username or "root"),
                               password=urllib.parse.unquote(u.password or ""), database=u.path.lstrip("/"))
    raise SystemExit(f"unknown DSN {dsn!r}")


def args(test: str, key: str, seq: int) -> dict:
    return {"Test": test, "Key": key, "Seq": seq, "SleepMS": 10 + seq % 25, "Mode": "", "N": 0}


def main() -> None:
    dsn, test, producer, per_key = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    conn = connect(dsn)
    # Every item: (kind, key, options), interleaved across keys.
    items = []
    for i in range(per_key):
        for k in range(3):
            items.append(("c.limit1", f"k{k}", None))
        for k in range(2):
            items.append(("c.discard1", f"d{k}", None))
        items.append(("c.unkeyed", f"u{i}", bqueue.Options(unique=bqueue.Unique(by_args=True))))
    out = []
    for start in range(0, len(items), 3):
        batch = items[start:start + 3]
        rolled_back = (start // 3) % 5 == 4
        rows = []
        for n, (kind, key, opts) in enumerate(batch):
            # The unique rows' args are the same in every producer: Seq 0.
            seq = 0 if kind == "c.unkeyed" else producer * 100000 + start + n
            h = bqueue.enqueue(conn, kind, args(test, key, seq), opts)
            rows.append({"id": h.id, "kind": kind, "key": key, "seq": seq, "rolled_back": rolled_back})
        if rolled_back:
            conn.rollback()
        else:
            conn.commit()
        out += rows
    for r in out:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
