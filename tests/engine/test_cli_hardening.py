"""The CLI's hardening (issue 18), in-process and without Spark: reading commands never
create a store, arguments are checked before anything is opened, every failure is one
named ``error:`` line with a documented exit code, and a produce that stops half-way
says exactly what it committed."""

from __future__ import annotations

import errno
import io

import pytest

from lakelog.cli import main
from lakelog.cli.produce import committed_ranges, produce_outcome
from lakelog.engine.errors import (
    CommitStateUnknownError,
    InvalidConfigError,
    PartiallyCommittedError,
    RecordTooLargeError,
    StoreAccessError,
    StoreError,
    StoreFullError,
    StoreNotFoundError,
    UnexpectedError,
    UnknownTopicOrPartitionError,
    error_for_exception,
    error_for_os_error,
    marked,
)
from lakelog.engine.produce.partitioner import partition_for_key
from lakelog.engine.records import RecordMetadata
from lakelog.store import Store


def run(capsys, monkeypatch, *argv: str, stdin: str = ""):
    """main's exit code, stdout, stderr; argparse's usage errors (SystemExit) count as exit codes."""
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def store_with_topic(tmp_path, partitions: int = 3) -> str:
    path = str(tmp_path / "s")
    Store.open(path).create_topic("t", partitions=partitions)
    return path


# -- reading commands never create a store ---------------------------------------------

READING_COMMANDS = [
    ["topics", "list"],
    ["topics", "describe"],
    ["topics", "describe", "t"],
    ["topics", "delete", "t"],
    ["topics", "alter", "t", "--partitions", "4"],
    ["offsets", "t"],
    ["consume", "t", "--from-beginning"],
    ["history"],
    ["groups", "list"],
    ["groups", "describe", "--group", "g"],
    ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--execute"],
    ["groups", "delete", "--group", "g"],
    ["maintain"],
    ["perf", "consume"],
    ["produce", "t"],
]


@pytest.mark.parametrize("argv", READING_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_mistyped_store_is_a_named_error_and_nothing_is_created(tmp_path, capsys, monkeypatch, argv):
    missing = tmp_path / "typo"
    code, out, err = run(capsys, monkeypatch, "--store", str(missing), *argv, stdin="a\n")
    assert code == StoreNotFoundError.exit_code == 1
    assert err.startswith(f"error: no lakelog store at {missing}") and "topics create" in err
    assert "Traceback" not in err and out == ""
    assert not missing.exists()
    # An existing, empty directory is no store either, and stays empty.
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, monkeypatch, "--store", str(empty), *argv, stdin="a\n")
    assert code == 1 and "no lakelog store at" in err
    assert list(empty.iterdir()) == []


def test_config_does_not_touch_the_store(tmp_path, capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--store", str(tmp_path / "typo"), "config")
    assert code == 0 and "num.partitions" in out
    assert list(tmp_path.iterdir()) == []


def test_the_python_api_still_creates_by_default_and_not_without_create(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no lakelog store at"):
        Store.open(tmp_path / "a", create=False)
    assert not (tmp_path / "a").exists()
    Store.open(tmp_path / "b")
    assert (tmp_path / "b" / "_delta_log").is_dir()


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "create", "t", "--partitions", "0"],
        ["topics", "create", "t", "--config", "colour=blue"],
        ["topics", "create", "t", "--config", "retention.ms=soon"],
        ["topics", "create", "__consumer_offsets"],
        ["topics", "create", "bad/name"],
    ],
)
def test_topics_create_refuses_bad_input_before_creating_the_store(tmp_path, capsys, monkeypatch, argv):
    path = tmp_path / "new"
    code, _, err = run(capsys, monkeypatch, "--store", str(path), *argv)
    assert code == 2 and "error" in err and "Traceback" not in err
    assert not path.exists()


# -- store paths -----------------------------------------------------------------------


def test_a_store_path_with_a_space_works_end_to_end(tmp_path, capsys, monkeypatch):
    path = str(tmp_path / "my store" / "s")
    assert run(capsys, monkeypatch, "--store", path, "topics", "create", "t")[0] == 0
    assert run(capsys, monkeypatch, "--store", path, "produce", "t", stdin="one\ntwo\n")[0] == 0
    code, out, _ = run(capsys, monkeypatch, "--store", path, "consume", "t", "--from-beginning", "--timeout-ms", "200")
    assert code == 0 and out.splitlines() == ["one", "two"]
    assert Store.open(path, create=False).end_offsets("t") == {0: 2}


@pytest.mark.parametrize("name", ["a%20b", "x%41y", "100%25"])
def test_a_store_path_with_a_percent_escape_is_refused_and_nothing_is_created(tmp_path, capsys, monkeypatch, name):
    # delta-rs decodes %20 and Spark does not: such a store was half-created, then unreadable.
    path = tmp_path / name / "s"
    code, _, err = run(capsys, monkeypatch, "--store", str(path), "topics", "create", "t")
    assert code == 2 and "percent-escape" in err
    with pytest.raises(InvalidConfigError, match="percent-escape"):
        Store.open(path)
    assert list(tmp_path.iterdir()) == []
    # A lone % is no escape: taken literally by both sides.
    assert run(capsys, monkeypatch, "--store", str(tmp_path / "50%" / "s"), "topics", "create", "t")[0] == 0


def test_a_store_path_that_is_a_file_is_a_store_error(tmp_path, capsys, monkeypatch):
    file = tmp_path / "f"
    file.write_text("mine")
    for create in (True, False):
        with pytest.raises(StoreError, match="is a file"):
            Store.open(file, create=create)
    code, _, err = run(capsys, monkeypatch, "--store", str(file), "topics", "create", "t")
    assert code == 1 and err == f"error: {file} is a file, not a directory that could hold a store\n"
    code, _, err = run(capsys, monkeypatch, "--store", str(file / "sub"), "topics", "create", "t")
    assert code == 1 and "Not a directory" in err and "Traceback" not in err
    assert file.read_text() == "mine"


def test_wrong_argument_types_are_invalid_config_errors(tmp_path):
    with pytest.raises(InvalidConfigError, match=r"str or os\.PathLike"):
        Store.open([str(tmp_path / "s")])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="conf_file"):
        Store.open(tmp_path / "s", conf_file=["x.conf"])  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
    store = Store.open(tmp_path / "s")
    with pytest.raises(InvalidConfigError, match="config must be a mapping"):
        store.create_topic("t", config=["retention.ms=5"])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="config must be a mapping"):
        store.create_topic("t", config="retention.ms=5")  # type: ignore[arg-type]
    assert store.list_topics() == []
    store.create_topic("t")
    with pytest.raises(InvalidConfigError, match="set_config must be a mapping"):
        store.alter_topic_config("t", ["retention.ms=5"])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="delete_config must be a list"):
        store.alter_topic_config("t", None, "retention.ms")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="delete_config must be a list"):
        store.alter_topic_config("t", None, 5)  # type: ignore[arg-type]
    assert store.alter_topic_config("t", None, ("retention.ms",)).overrides == {}


# -- one mapping from failures to exit codes ----------------------------------------------


def test_os_errors_map_to_named_store_errors():
    full = error_for_os_error(OSError(errno.ENOSPC, "No space left on device", "/s/x.parquet"), "produce")
    assert isinstance(full, StoreFullError) and str(full) == "produce failed: No space left on device: /s/x.parquet"
    for code in (errno.EROFS, errno.EACCES, errno.EPERM):
        assert isinstance(error_for_os_error(OSError(code, "refused"), "maintain"), StoreAccessError)
    missing = error_for_os_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "/w"), "perf groups")
    assert type(missing) is StoreError and str(missing) == "perf groups failed: No such file or directory: /w"
    # delta-rs: no errno, coloured lines, the OS error number at the end.
    rust = OSError(
        "Generic LocalFileSystem error\n  \x1b[31m\u21b3\x1b[0m Unable to write\n"
        "   \x1b[31m\u21b3\x1b[0m Read-only file system (os error 30)\n"
    )
    error = error_for_os_error(rust, "maintain")
    assert isinstance(error, StoreAccessError)
    assert str(error) == (
        "maintain failed: Generic LocalFileSystem error: Unable to write: Read-only file system (os error 30)"
    )


def test_any_failure_maps_to_one_named_error():
    too_large = RecordTooLargeError("big")
    assert error_for_exception(too_large, "produce") is too_large
    carried = error_for_exception(RuntimeError("Job aborted: " + marked(RecordTooLargeError, "r1 is too big")), "x")
    assert isinstance(carried, RecordTooLargeError) and str(carried) == "r1 is too big"
    unexpected = error_for_exception(KeyError("boom"), "x")
    assert isinstance(unexpected, UnexpectedError) and str(unexpected) == "KeyError: 'boom'"
    py4j = RuntimeError("An error occurred while calling o1.save.")
    jvm = error_for_exception(py4j, "x", "java.io.IOException: x\n\tat")
    assert str(jvm) == "RuntimeError: java.io.IOException: x"


def test_an_os_error_in_a_command_is_one_line_and_the_traceback_needs_v(tmp_path, capsys, monkeypatch):
    path = store_with_topic(tmp_path)

    def read_only(*_args, **_kwargs):
        raise OSError("Generic LocalFileSystem error\n \u21b3 Read-only file system (os error 30)")

    monkeypatch.setattr("deltalake.DeltaTable.vacuum", read_only)
    code, _, err = run(capsys, monkeypatch, "--store", path, "maintain")
    assert code == StoreAccessError.exit_code == 1
    assert "error: maintain failed: Generic LocalFileSystem error: Read-only file system (os error 30)\n" in err
    assert "Traceback" not in err
    code, _, err = run(capsys, monkeypatch, "-v", "--store", path, "maintain")
    assert code == 1 and "Traceback" in err and err.rstrip().endswith("(os error 30)")


def test_an_unexpected_error_is_one_line_with_a_hint(tmp_path, capsys, monkeypatch):
    path = store_with_topic(tmp_path)

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(Store, "list_topics", broken)
    code, out, err = run(capsys, monkeypatch, "--store", path, "topics", "list")
    assert (code, out) == (1, "")
    assert err == "error: RuntimeError: boom\n(run again with -v to see the traceback)\n"
    code, _, err = run(capsys, monkeypatch, "-v", "--store", path, "topics", "list")
    assert code == 1 and "Traceback" in err and "run again" not in err

    class JavaException:
        def toString(self):  # Py4J's name
            return "org.apache.spark.SparkException: Job aborted\n\tat org.apache..."

    class Py4JLike(Exception):
        java_exception = JavaException()

    def jvm(*_args, **_kwargs):
        raise Py4JLike("An error occurred while calling o42.save.\n: org.apache.spark.SparkException: ...")

    monkeypatch.setattr(Store, "list_topics", jvm)
    code, _, err = run(capsys, monkeypatch, "--store", path, "topics", "list")
    assert code == 1 and err.splitlines()[0] == "error: Py4JLike: org.apache.spark.SparkException: Job aborted"


def test_a_failed_store_creation_leaves_no_directories(tmp_path, capsys, monkeypatch):
    def disk_full(directory, name, *_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", f"{directory}/{name}")

    monkeypatch.setattr("lakelog.engine.commit.log_files.put_if_absent", disk_full)
    code, _, err = run(capsys, monkeypatch, "--store", str(tmp_path / "new" / "deep" / "s"), "topics", "create", "t")
    assert code == StoreFullError.exit_code and err.startswith("error: creating a store at ")
    assert "No space left on device" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    # A directory the user made is kept (only what the call made is removed).
    (tmp_path / "mine").mkdir()
    with pytest.raises(StoreFullError):
        Store.open(tmp_path / "mine")
    assert [p.name for p in tmp_path.iterdir()] == ["mine"] and list((tmp_path / "mine").iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["perf", "groups", "--work-dir", "/nonexistent/x"],
        ["perf", "commit", "--work-dir", "/nonexistent/x"],
        ["perf", "commit", "--work-dir", "s3a://bucket/x"],
        ["--store", "STORE", "perf", "produce", "--num-records", "10", "--work-dir", "/nonexistent/x"],
        ["--store", "STORE", "perf", "stream", "--work-dir", "/nonexistent/x"],
    ],
)
def test_a_bad_work_dir_is_a_usage_error_before_anything_runs(tmp_path, capsys, monkeypatch, argv):
    argv = [str(tmp_path / "s") if a == "STORE" else a for a in argv]
    code, _, err = run(capsys, monkeypatch, *argv)
    assert code == 2 and "--work-dir" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


# -- exit codes as documented ---------------------------------------------------------------


def test_unknown_topics_and_partitions_exit_6(tmp_path, capsys, monkeypatch):
    path = store_with_topic(tmp_path)
    code, _, err = run(capsys, monkeypatch, "--store", path, "produce", "nope", stdin="a\n")
    assert code == 6 and err == "error: topic 'nope' does not exist\n"
    code, _, err = run(capsys, monkeypatch, "--store", path, "produce", "t", "--partition", "3", stdin="a\n")
    assert code == 6 and "partition 3 of topic 't' does not exist" in err
    code, _, err = run(capsys, monkeypatch, "--store", path, "consume", "t", "--partition", "9")
    assert code == 6 and "partition 9 of topic 't' does not exist (the topic has 3)" in err
    assert Store.open(path).end_offsets("t") == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consume", "t", "--max-messages", "-1"], "--max-messages: must be at least 0, got -1"),
        (["consume", "t", "--partition", "-1"], "--partition: must be at least 0"),
        (["consume", "t", "--from-timestamp", "-5"], "--from-timestamp: must be at least 0"),
        (["consume", "t", "--partition", "0", "--offset", "-3"], "--offset must be earliest, latest or"),
        (["consume", "t", "--offset", "3"], "--offset needs --partition"),
        (
            ["consume", "t", "--from-timestamp", "4611686018427387904"],
            "--from-timestamp 4611686018427387904 is outside 0..253402300799999 ms",
        ),
        (
            ["consume", "t", "--partition", "0", "--offset", "9223372036854775808"],
            "--offset 9223372036854775808 is outside 0..9223372036854775807",
        ),
        (["produce", "t", "--partition", "-2"], "--partition: must be at least 0"),
        (["perf", "produce", "--num-records", "0"], "--num-records: must be at least 1"),
        (["perf", "transactions", "--records", "0"], "--records: must be at least 1"),
        (["perf", "stream", "--latency-samples", "x"], "must be an integer, got 'x'"),
        (["perf", "maintain", "--commits", "-1"], "--commits: must be at least 1"),
        (["perf", "groups", "--idle-seconds", "nan"], "--idle-seconds: must be at least 0"),
        (["maintain", "--vacuum-retention-hours", "-1"], "--vacuum-retention-hours: must be at least 0"),
    ],
)
def test_numeric_arguments_are_checked_before_the_store_is_opened(tmp_path, capsys, monkeypatch, argv, message):
    missing = tmp_path / "typo"  # exit 2, not the missing store's 1: nothing was opened
    code, _, err = run(capsys, monkeypatch, "--store", str(missing), *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert not missing.exists()


def test_help_lists_the_partial_exit_code(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0 and "7 partially committed" in capsys.readouterr().out


# -- a produce that stops half-way ----------------------------------------------------------


def test_produce_stops_at_a_malformed_line_and_names_what_it_committed(tmp_path, capsys, monkeypatch):
    path = store_with_topic(tmp_path)
    p = partition_for_key(b"k1", 3)
    code, out, err = run(
        capsys, monkeypatch, "--store", path, "produce", "t", "--parse-key", stdin="k1\tv1\nmalformed\nk3\tv3\n"
    )
    assert code == PartiallyCommittedError.exit_code == 7 and out == ""
    assert err.startswith(f"error: committed 1 record(s): t-{p} offsets 0..0; first failure: line 2 has no key")
    assert "would duplicate" in err
    store = Store.open(path)
    assert sum(store.end_offsets("t").values()) == 1 and store.end_offsets("t")[p] == 1
    code, out, err = run(
        capsys,
        monkeypatch,
        "--store",
        path,
        "consume",
        "t",
        "--from-beginning",
        "--max-messages",
        "1",
        "--property",
        "print.key=true",
    )
    assert out == "k1\tv1\n"

    # Nothing committed: the error's own code, and the log is unchanged.
    code, _, err = run(capsys, monkeypatch, "--store", path, "produce", "t", "--parse-key", stdin="bad\nk\tv\n")
    assert code == 2 and err.startswith("error: line 1 has no key separator")
    assert sum(store.end_offsets("t").values()) == 1


def test_committed_ranges_and_the_produce_outcome():
    def md(partition: int, offset: int) -> RecordMetadata:
        return RecordMetadata("t", partition, offset, 0)

    records = [md(1, 0), md(0, 5), md(0, 3), md(0, 4), md(0, 9)]
    assert committed_ranges(records) == "t-0 offsets 3..5,9..9, t-1 offsets 0..0"
    assert produce_outcome(records, None, []) is None
    bad = InvalidConfigError("line 3 is bad")
    assert produce_outcome([], bad, []) is bad
    unknown = CommitStateUnknownError("lost response")
    assert produce_outcome([], None, [UnknownTopicOrPartitionError("x"), unknown]) is unknown
    partial = produce_outcome([md(0, 0)], None, [unknown])
    assert isinstance(partial, PartiallyCommittedError) and partial.exit_code == 7
    assert str(partial).startswith("committed 1 record(s): t-0 offsets 0..0; 1 record(s) failed, 1 of them with")
    failed = produce_outcome([], None, [KeyError("k")])
    assert isinstance(failed, UnexpectedError)
