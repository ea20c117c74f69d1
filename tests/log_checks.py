"""Checks of the one invariant over what a store holds and what producers were told."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


def read_acks(paths) -> list[dict]:
    entries = []
    for path in paths:
        path = Path(path)
        if path.exists():
            entries += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return entries


def check_dense(rows) -> dict[tuple[str, int], int]:
    """Offsets of every (topic, partition) are exactly 0..N-1; returns N per partition."""
    offsets = defaultdict(list)
    for r in rows:
        offsets[(r.topic, r.partition)].append(r.offset)
    problems = []
    for tp, got in offsets.items():
        if sorted(got) != list(range(len(got))):
            dupes = len(got) - len(set(got))
            problems.append(f"{tp}: {len(got)} records, {dupes} repeated offsets, max {max(got)}")
    assert not problems, "offsets are not dense: " + "; ".join(problems)
    return {tp: len(v) for tp, v in offsets.items()}


def check_acknowledged(rows, acks: list[dict]) -> None:
    """Every acknowledged record is present exactly once, at the offset it was told,
    and each worker's records in a partition are in its send order."""
    where = defaultdict(list)
    for r in rows:
        where[bytes(r.value).decode()].append((r.topic, r.partition, r.offset))
    sent_order = defaultdict(list)
    for ack in acks:
        if "error" in ack:
            continue
        places = where.get(ack["value"], [])
        assert places == [(ack["topic"], ack["p"], ack["o"])], f"{ack} is stored at {places}"
        sent_order[(ack["w"], ack["topic"], ack["p"])].append((ack["i"], ack["o"]))
    for key, pairs in sent_order.items():
        by_send = [o for _, o in sorted(pairs)]
        assert by_send == sorted(by_send), f"{key}: offsets not in send order"
