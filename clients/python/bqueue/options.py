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

OnConflict = Literal["block", "discard", "replace", "cancel_running"]

#: The states a Unique may name (bq.JobState).
JobState = Literal["scheduled", "ready", "blocked", "running", "completed", "failed", "discarded", "cancelled", "waiting"]


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


# MAX_SLOTS is bq.MaxSlots: the most slots a job takes of each of its keys.
MAX_SLOTS = 1000


def _ms(d: timedelta, what: str) -> int:
    if not isinstance(d, timedelta):
        raise TypeError(f"{what} is a {type(d).__name__}: give a datetime.timedelta")
    return int(d / timedelta(milliseconds=1))


@dataclass(frozen=True)
class Options:
    """The options of an enqueue, each the Go EnqueueOption of its name;
    None leaves it to the job's definition (bq.JobOptions)."""

    queue: Optional[str] = None  # bq.Queue
    priority: Optional[int] = None  # bq.Priority: higher runs first
    slots: Optional[int] = None  # bq.Slots: slots taken of each concurrency key, 1 to 1000
    run_at: Optional[datetime] = None  # bq.At: aware datetime
    run_in: Optional[timedelta] = None  # bq.In
    concurrency_key: Optional[ConcurrencyKey] = None  # bq.WithConcurrencyKey
    more_concurrency_keys: Optional[Sequence[KeyLimit]] = None  # bq.WithMoreConcurrencyKeys
    rate_key: Optional[RateKey] = None  # bq.WithRateKey
    unique: Optional[Unique] = None  # bq.WithUnique
    metadata: Optional[Mapping[str, str]] = None  # bq.WithMetadata
    tags: Optional[Sequence[str]] = None  # bq.WithTags
    depends_on: Optional[Sequence[int]] = None  # bq.DependsOn: ids of stored jobs
    even_if_dependencies_fail: bool = False  # bq.EvenIfDependenciesFail

    def to_json(self) -> str:
        """The options JSON object of an inbox row; only what is set."""
        o: dict[str, Any] = {}
        if self.queue is not None:
            o["queue"] = self.queue
        if self.priority is not None:
            if isinstance(self.priority, bool) or not isinstance(self.priority, int):
                raise TypeError(f"priority is a {type(self.priority).__name__}: give an int")
            o["priority"] = self.priority
        if self.slots is not None:
            if isinstance(self.slots, bool) or not isinstance(self.slots, int):
                raise TypeError(f"slots is a {type(self.slots).__name__}: give an int")
            if not 0 <= self.slots <= MAX_SLOTS:
                raise ValueError(f"Slots is {self.slots}: use 1 to {MAX_SLOTS} (bq.MaxSlots), or 0 for 1")
            o["slots"] = self.slots
        if self.run_at is not None and self.run_in is not None:
            raise ValueError("run_at and run_in are both set: give one")
        if self.run_at is not None:
            if not isinstance(self.run_at, datetime) or self.run_at.tzinfo is None:
                raise ValueError("run_at must be a datetime with a time zone, e.g. datetime.now(timezone.utc)")
            o["run_at"] = self.run_at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        if self.run_in is not None:
            o["run_in_ms"] = _ms(self.run_in, "run_in")
        if (k := self.concurrency_key) is not None:
            key: dict[str, Any] = {"key": k.key, "to": k.to}
            if k.on_conflict is not None:
                key["on_conflict"] = k.on_conflict
            o["concurrency_key"] = key
        if self.more_concurrency_keys is not None:
            o["more_concurrency_keys"] = [{"key": m.key, "to": m.to, "on_conflict": m.on_conflict}
                                          for m in self.more_concurrency_keys]
        if (r := self.rate_key) is not None:
            rate: dict[str, Any] = {"key": r.key, "limit": r.limit}
            if r.period is not None:
                rate["period_ms"] = _ms(r.period, "rate_key.period")
            o["rate_key"] = rate
        if (u := self.unique) is not None:
            uniq: dict[str, Any] = {"by_args": u.by_args, "by_queue": u.by_queue}
            if u.by_period is not None:
                uniq["by_period_ms"] = _ms(u.by_period, "unique.by_period")
            if u.by_states:
                uniq["by_states"] = list(u.by_states)
            o["unique"] = uniq
        if self.metadata is not None:
            o["metadata"] = dict(self.metadata)
        if self.tags is not None:
            o["tags"] = list(self.tags)
        if self.depends_on is not None:
            ids = list(self.depends_on)
            for i in ids:
                if isinstance(i, bool) or not isinstance(i, int) or i <= 0:
                    raise ValueError(f"depends_on holds {i!r}: give the ids (positive ints) of stored jobs, e.g. an Outcome's job_id")
            o["depends_on"] = ids
        if self.even_if_dependencies_fail:
            if not self.depends_on:
                raise ValueError("even_if_dependencies_fail without depends_on: name the jobs it waits for")
            o["even_if_dependencies_fail"] = True
        return json.dumps(o, separators=(",", ":"))


def args_json(args: Any) -> str:
    """The job's args as JSON: a mapping, or a dataclass (its fields)."""
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        args = dataclasses.asdict(args)
    try:
        return json.dumps(args, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"args do not encode as JSON: {e}") from e
