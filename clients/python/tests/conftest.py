"""Fixtures: a fresh, migrated database per test on each database of
BQ_TEST_DRIVERS (sqlite,postgres,mysql by default; servers from
BQ_TEST_POSTGRES_DSN and BQ_TEST_MYSQL_DSN, as bq's Go tests use), a
connection of the Python driver to it, and the Go process that admits the
inbox's rows (tests/goworker), started on demand.

bq's schema is created by the Go side: `bq migrate up`, built once per run.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[3]  # bq's repository
sys.path.insert(0, str(ROOT / "clients" / "python"))

DRIVERS = [d.strip() for d in os.environ.get("BQ_TEST_DRIVERS", "sqlite,postgres,mysql").split(",") if d.strip()]
POSTGRES_DSN = os.environ.get("BQ_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
MYSQL_DSN = os.environ.get("BQ_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306/test")


@pytest.fixture(scope="session")
def gobin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bq command and the test worker, built once."""
    out = tmp_path_factory.mktemp("gobin")
    bins = {"bq": "./bq", "goworker": "./clients/python/tests/goworker"}
    for name, pkg in bins.items():
        subprocess.run(["go", "build", "-o", str(out / name), pkg], cwd=ROOT, check=True)
    return {name: out / name for name in bins}


def _with_db(dsn: str, name: str) -> str:
    u = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit((u.scheme, u.netloc, "/" + name, u.query, u.fragment))


def _mysql_args(dsn: str) -> dict[str, Any]:
    u = urllib.parse.urlsplit(dsn)
    return {"host": u.hostname or "127.0.0.1", "port": u.port or 3306, "user": urllib.parse.unquote(u.username or "root"),
            "password": urllib.parse.unquote(u.password or ""), "database": u.path.lstrip("/") or None}


@dataclass
class Database:
    """One test's fresh database: its Go DSN and a way to connect from Python."""

    kind: str
    dsn: str
    connect: Callable[..., Any]
    gobin: dict[str, Path]
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def worker(self) -> subprocess.Popen[str]:
        """Start the Go process that admits the inbox's rows; stopped at the test's end."""
        p = subprocess.Popen([str(self.gobin["goworker"]), "--dsn", self.dsn], stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.strip() == "running", f"goworker did not start: {line!r}"
        return p


@pytest.fixture(params=DRIVERS)
def db(request: pytest.FixtureRequest, gobin: dict[str, Path], tmp_path: Path) -> Iterator[Database]:
    kind = request.param
    name = "bqpy_" + secrets.token_hex(6)
    cleanup: Callable[[], None] = lambda: None
    if kind == "sqlite":
        path = tmp_path / "bq.db"
        dsn = f"sqlite://{path}"
        connect: Callable[..., Any] = lambda autocommit=False: sqlite3.connect(
            path, timeout=30, isolation_level=None if autocommit else "")
    elif kind == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        dsn = _with_db(POSTGRES_DSN, name)
        connect = lambda autocommit=False: psycopg.connect(dsn, autocommit=autocommit)

        def cleanup() -> None:
            with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    elif kind == "mysql":
        import pymysql

        admin = pymysql.connect(**{**_mysql_args(MYSQL_DSN), "database": None}, autocommit=True)
        admin.cursor().execute(f"CREATE DATABASE `{name}`")
        dsn = _with_db(MYSQL_DSN, name)
        connect = lambda autocommit=False: pymysql.connect(**_mysql_args(dsn), autocommit=autocommit)

        def cleanup() -> None:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
            admin.close()
    else:
        raise ValueError(f"unknown database {kind!r} in BQ_TEST_DRIVERS")
    subprocess.run([str(gobin["bq"]), "migrate", "up", "--dsn", dsn], check=True, capture_output=True)
    d = Database(kind=kind, dsn=dsn, connect=connect, gobin=gobin)
    try:
        yield d
    finally:
        for p in d.procs:
            p.terminate()
            p.wait(timeout=30)
        cleanup()
