"""The options of one enqueue, as the Go side reads them (docs/clients.md).

Each is the Go EnqueueOption of the same name. The client only shapes
them; the Go process that admits the job checks them with Go's rules, and
a bad one makes the row's outcome ``refused`` with the reason.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Literal, Mapping, Optional, Sequence

OnConflict = Literal["block", "discard"]

#: The states a Unique may name (bq.JobState).
JobState = Literal["scheduled", "ready", "blocked", "running", "completed", "failed", "discarded", "cancelled"]


@dataclass(frozen=True)
class ConcurrencyKey:
    """bq.WithConcurrencyKey: limit the job to ``to`` at once among jobs of
    ``key`` (the definition's Group still applies). ``to`` 0 takes the
    default (the queue policy's MaxActivePerKey, else 1); ``on_conflict``
    None keeps the definition's. An empty key means no limit."""

    key: str
    to: int = 0
    on_conflict: Optional[OnConflict] = None


@dataclass(frozen=True)
class KeyLimit:
    """One of bq.WithMoreConcurrencyKeys: a FULL key (``group/key``)."""

    key: str
    to: int = 0
    on_conflict: OnConflict = "block"


@dataclass(frozen=True)
class RateKey:
    """bq.WithRateKey: at most ``limit`` starts per ``period`` of ``key``;
    0 and None keep the definition's rate (or the queue policy's)."""

    key: str
    limit: int = 0
    period: Optional[timedelta] = None


@dataclass(frozen=True)
class Unique:
    """bq.Unique: no second job of the same unique key while one is in
    ``by_states`` (empty: Go's default states)."""

    by_args: bool = False
    by_queue: bool = False
    by_period: Optional[timedelta] = None
    by_states: Sequence[JobState] = ()


def _ms(d: timedelta, what: str) -> int:
    if not isinstance(d, timedelta):
        raise TypeError(f"{what} is a {type(d).__name__}: give a datetime.timedelta")
    return int(d / timedelta(milliseconds=1))


def options_json(
    *,
    queue: Optional[str] = None,
    priority: Optional[int] = None,
    run_at: Optional[datetime] = None,
    run_in: Optional[timedelta] = None,
    concurrency_key: Optional[ConcurrencyKey] = None,
    more_concurrency_keys: Optional[Sequence[KeyLimit]] = None,
    rate_key: Optional[RateKey] = None,
    unique: Optional[Unique] = None,
    metadata: Optional[Mapping[str, str]] = None,
    tags: Optional[Sequence[str]] = None,
) -> str:
    """The options JSON object of an inbox row; only what is set."""
    o: dict[str, Any] = {}
    if queue is not None:
        o["queue"] = queue
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority is a {type(priority).__name__}: give an int")
        o["priority"] = priority
    if run_at is not None and run_in is not None:
        raise ValueError("run_at and run_in are both set: give one")
    if run_at is not None:
        if not isinstance(run_at, datetime) or run_at.tzinfo is None:
            raise ValueError("run_at must be a datetime with a time zone, e.g. datetime.now(timezone.utc)")
        o["run_at"] = run_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    if run_in is not None:
        o["run_in_ms"] = _ms(run_in, "run_in")
    if concurrency_key is not None:
        k: dict[str, Any] = {"key": concurrency_key.key, "to": concurrency_key.to}
        if concurrency_key.on_conflict is not None:
            k["on_conflict"] = concurrency_key.on_conflict
        o["concurrency_key"] = k
    if more_concurrency_keys is not None:
        o["more_concurrency_keys"] = [{"key": k.key, "to": k.to, "on_conflict": k.on_conflict} for k in more_concurrency_keys]
    if rate_key is not None:
        r: dict[str, Any] = {"key": rate_key.key, "limit": rate_key.limit}
        if rate_key.period is not None:
            r["period_ms"] = _ms(rate_key.period, "rate_key.period")
        o["rate_key"] = r
    if unique is not None:
        u: dict[str, Any] = {"by_args": unique.by_args, "by_queue": unique.by_queue}
        if unique.by_period is not None:
            u["by_period_ms"] = _ms(unique.by_period, "unique.by_period")
        if unique.by_states:
            u["by_states"] = list(unique.by_states)
        o["unique"] = u
    if metadata is not None:
        o["metadata"] = dict(metadata)
    if tags is not None:
        o["tags"] = list(tags)
    return json.dumps(o, separators=(",", ":"))


def args_json(args: Any) -> str:
    """The job's args as JSON: a mapping, or a dataclass (its fields)."""
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        args = dataclasses.asdict(args)
    try:
        return json.dumps(args, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"args do not encode as JSON: {e}") from e
