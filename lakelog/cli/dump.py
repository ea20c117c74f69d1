"""``lakelog dump``: kafka-dump-log for a partition. A partition's "segments" are the live data
files of its Delta table (the ``add`` actions of the latest version); each is dumped with the
records it holds, in offset order, as DumpLogSegments prints a segment's batches."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from lakelog.cli.arguments import (
    NON_NEGATIVE,
    Out,
    add_topic_args,
    decode,
    ms_to_text,
    open_store,
    require_partition,
    topic_arg,
)
from lakelog.cli.tables import table
from lakelog.engine.topics import TopicPartition

if TYPE_CHECKING:
    from lakelog.store import Store

PREVIEW = 60  # characters of a key or value shown without --print-data-log


def _preview(data: bytes | None, full: bool) -> str:
    text = decode(data)
    if data is None or full or len(text) <= PREVIEW:
        return text
    return text[:PREVIEW] + "..."


def _live_files(store: Store, tp: TopicPartition) -> tuple[Any, list[Any]]:
    """The partition's files at the latest version: by first offset, files without statistics last."""
    state = store.log.latest()
    files = state.files_of(tp)
    return files, list(files.ordered) + list(files.other)


def cmd_dump(args: argparse.Namespace, out: Out) -> None:
    topic = topic_arg(args, "dump")
    assert topic is not None
    store = open_store(args)
    partitions = store.describe_topic(topic).partitions
    require_partition(topic, args.partition, partitions)
    tp = TopicPartition(topic, args.partition)
    files, live = _live_files(store, tp)
    if args.files:
        rows = [
            [
                f.path,
                "-" if f.min_offset is None else f.min_offset,
                "-" if f.max_offset is None else f.max_offset,
                "-" if f.num_records is None else f.num_records,
                "-" if f.size is None else f.size,
                ms_to_text(f.min_timestamp_ms) or "-",
                ms_to_text(f.max_timestamp_ms) or "-",
            ]
            for f in live
        ]
        out(
            table(
                ["FILE", "FIRST-OFFSET", "LAST-OFFSET", "RECORDS", "BYTES", "FIRST-TIMESTAMP", "LAST-TIMESTAMP"], rows
            )
        )
        return
    _dump_records(store, tp, files, args, out)


def _dump_records(store: Store, tp: TopicPartition, files: Any, args: argparse.Namespace, out: Out) -> None:
    from lakelog.engine.commit.partition_reader import PartitionReader

    reader = PartitionReader(store.uri)
    start = args.offset or 0
    end = files.end
    left = args.max_messages
    dumped = 0
    for f in files.covering(start, None):
        if left is not None and left <= 0:
            break
        rows = reader.read_file(f.path, offsets=(start, None) if f.has_offset_stats else None, held=f)
        offsets = rows.column("offset").to_pylist()
        order = sorted((o, i) for i, o in enumerate(offsets) if o is not None and o >= start)
        if left is not None:
            order = order[:left]
        stats = (
            f"offsets {f.min_offset}..{f.max_offset}, {f.num_records} record(s)"
            if f.has_offset_stats
            else "no offset statistics"
        )
        out(f"Dumping {f.path} ({stats}, {f.size if f.size is not None else '?'} bytes)")
        if not order:
            continue
        picked = rows.take([i for _, i in order]).to_pylist()
        for row in picked:
            out(_record_line(row, end, args.print_data_log))
        dumped += len(picked)
        if left is not None:
            left -= len(picked)
    if not dumped:
        out(f"No records of {tp.topic}-{tp.partition} at or after offset {start}.")


def _record_line(row: dict[str, Any], end: int | None, full: bool) -> str:
    kind = "CreateTime" if row["timestamp_type"] == 0 else "LogAppendTime"
    stamp = row["timestamp"]
    ms = int(stamp.timestamp() * 1000) if stamp is not None else -1
    key, value, headers = row["key"], row["value"], row["headers"] or []
    parts = [
        f"| offset: {row['offset']}",
        f"{kind}: {ms}",
        f"keySize: {-1 if key is None else len(key)}",
        f"valueSize: {-1 if value is None else len(value)}",
        f"producerId: {-1 if row.get('producer_id') is None else row['producer_id']}",
        f"sequence: {-1 if row.get('sequence') is None else row['sequence']}",
        f"headerKeys: [{','.join(h['key'] for h in headers)}]",
        f"key: {_preview(key, full)}",
        f"payload: {_preview(value, full)}",
    ]
    if end is not None and row["offset"] >= end:
        parts.append("(past the committed end: not a record)")
    return " ".join(parts)


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "dump",
        parents=parents,
        help="a partition's records and the data files holding them (kafka-dump-log)",
        description="Prints the live data files (Delta add paths) of one partition, each followed by its "
        "records in offset order: offset, timestamp, key and value sizes, producer id, sequence, header keys, "
        "key and payload (cut at 60 characters unless --print-data-log). --files lists the files only.",
    )
    add_topic_args(p, "the topic")
    p.add_argument("--partition", type=NON_NEGATIVE, default=0, help="the partition (default 0)")
    p.add_argument("--offset", type=NON_NEGATIVE, help="start at this offset (default: the log start)")
    p.add_argument("--max-messages", type=NON_NEGATIVE, help="stop after this many records")
    p.add_argument("--files", action="store_true", help="list the partition's live files and their offset ranges")
    p.add_argument("--print-data-log", action="store_true", help="print keys and payloads whole")
    p.set_defaults(func=cmd_dump)
