"""``lakelog setup``: fetch, ahead of the first SparkSession, the jars lakelog's sessions use.

Delta Lake's jars, Spark's spark-avro (``from_avro`` of typed reads), protobuf-java (Protobuf typed
reads) and with ``--s3`` Hadoop's S3A
connector are resolved through Ivy from Maven Central into the user's Ivy cache and kept under
``jars.dir`` (default ``~/.cache/lakelog/jars``), as the first session would do on its own;
lakelog's own JVM library ships inside the package. Running it again resolves nothing and prints
where the jars are."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lakelog.cli.arguments import Out
from lakelog.cli.tables import steps


def add_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "setup",
        parents=parents,
        help="fetch Delta Lake's jars (and with --s3 the S3A connector) for Spark sessions, once",
    )
    p.add_argument("--s3", action="store_true", help="also Hadoop's S3A connector and the AWS SDK (~690 MB)")
    p.add_argument("--jars-dir", metavar="DIR", help="where to keep them (default: the jars.dir setting)")
    p.set_defaults(func=cmd_setup)


def cmd_setup(args: argparse.Namespace, out: Out) -> int:
    from lakelog.engine.settings import load_settings
    from lakelog.jvm import jars as jvm_jars

    root = jvm_jars.cache_root(args.jars_dir or load_settings(args.conf).jars_dir)
    sets = [jvm_jars.delta_jar_set(), jvm_jars.spark_avro_jar_set(), jvm_jars.protobuf_jar_set()]
    sets += [jvm_jars.s3a_jar_set()] if args.s3 else []
    results: list[tuple[str, list[Path]]] = []
    with steps("looking for lakelog's jars") as progress:
        for jar_set in sets:
            progress(f"resolving {', '.join(jar_set.coordinates)} through Ivy")
            results.append((jar_set.name, jvm_jars.ensure(jar_set, root)))
    own = jvm_jars.lakelog_jar()
    for name, jars in results:
        size = sum(j.stat().st_size for j in jars)
        out(f"{name}: {len(jars)} jars, {size / 1e6:.1f} MB in {root / name}")
    out(f"lakelog-jvm: {own}")
    if not args.s3:
        print("(S3A's jars are fetched when an s3a:// store is first opened, or now with --s3)", file=sys.stderr)
    return 0
