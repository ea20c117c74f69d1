"""The quickstart job and the perf tools run end to end (small sizes)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from lakelog.cli import main
from lakelog.cli.quickstart import run_quickstart


def test_quickstart_runs_end_to_end_without_spark_and_can_run_again(tmp_path):
    lines = []
    run_quickstart(str(tmp_path / "qs"), lines.append)
    run_quickstart(str(tmp_path / "qs"), lines.append)
    text = "\n".join(lines)
    assert text.count("acknowledged: partition") == 18
    assert text.count("order 8 for carol") == 2  # consumed back, each run
    assert "end offsets: {0: " in text
    assert "produce" in text and "create_topic" in text
    assert "read as a plain Delta table (delta-rs): 9 rows" in text


def test_perf_commit_prints_every_section_with_its_baseline(tmp_path, capsys):
    argv = ["perf", "commit", "--commits", "20", "--num-records", "8000", "--processes", "2", "--batches", "3"]
    argv += ["--small-versions", "10", "--large-versions", "120", "--work-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for section in ("latency:", "dir-sync:", "throughput:", "contention:", "first-ack:", "growth:"):
        assert section in out
    assert "delta-rs blind append p50" in out and "pyarrow write_table of the same rows" in out
    assert "with directory syncs p50" in out and "without p50" in out and "ratio p50" in out
    assert "0 DeliveryTimeoutError(s)" in out
    assert "cold Store.open + first poll" in out
    assert "confluent-kafka" not in out  # only with --kafka
    assert list(tmp_path.iterdir()) == []  # its temporary stores are gone


@pytest.mark.kafka
def test_perf_commit_sets_per_record_loops_and_contention_beside_confluent_kafka_on_a_broker(tmp_path, capsys):
    argv = ["perf", "commit", "--sections", "throughput,contention", "--num-records", "4000", "--processes", "2"]
    assert main([*argv, "--batches", "2", "--kafka", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "per-record loops of 4,000 records, 3 interleaved rounds, medians: lakelog send() " in out
    assert "vs confluent-kafka produce() -> broker " in out and "vs confluent-kafka poll() " in out
    assert "median of 3 interleaved rounds" in out
    # Both broker peers: Kafka's defaults and the durable baseline (the topic's config is checked
    # when it is created: create_topic refuses a broker that does not hold it).
    assert "contention: confluent-kafka -> broker (its defaults)" in out and "ratio lakelog/kafka " in out
    assert "contention: confluent-kafka -> broker (a topic with flush.messages=1)" in out
    assert "ratio lakelog/kafka flush=1 " in out
    assert list(tmp_path.iterdir()) == []


def test_perf_startup_prints_every_path_beside_confluent_kafka(tmp_path, capsys):
    assert main(["perf", "startup", "--rounds", "1", "--lines", "20", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "startup: 1 interleaved rounds, medians (load average" in out and "bytecode cached)" in out
    for row in (
        "python (interpreter only)",
        "import lakelog ",
        "python -c -> first acknowledged record",
        "lakelog topics --create",
        "lakelog produce < lines",
        "lakelog consume --max-messages 3",
        "confluent-kafka import + first produce (queued)",
    ):
        assert f"  {row}" in out, row
    assert out.count("target <= ") == 4
    # Every lakelog path reports what it imported, and none of them imports the heavy ones.
    assert out.count("imports none of pandas/pyspark/py4j/confluent_kafka") == 6, out
    assert "broker first ack" not in out  # only with --kafka
    assert list(tmp_path.iterdir()) == []


@pytest.mark.kafka
@pytest.mark.slow
def test_perf_startup_times_confluent_kafkas_first_ack_from_a_broker(tmp_path, capsys):
    # The reference broker does not auto-create topics: the verb creates the row's topic first.
    argv = ["perf", "startup", "--kafka", "--rounds", "1", "--lines", "20", "--work-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "  confluent-kafka -> broker first ack " in out, out
    assert list(tmp_path.iterdir()) == []


def test_perf_startup_caches_bytecode_in_its_own_directory_unless_told_not_to(tmp_path, monkeypatch):
    from benchmarks.startup import ROOT, child_environment

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    cached = child_environment(str(tmp_path), bytecode_cache=True)
    assert "PYTHONDONTWRITEBYTECODE" not in cached and cached["PYTHONPYCACHEPREFIX"] == f"{tmp_path}/pycache"
    as_is = child_environment(str(tmp_path), bytecode_cache=False)
    assert as_is["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in as_is
    assert cached["PYTHONPATH"] == as_is["PYTHONPATH"] == str(ROOT)


@pytest.mark.slow
def test_perf_groups_runs_member_processes_and_reports_duplicates_and_settle_times(tmp_path, capsys):
    argv = ["perf", "groups", "--sizes", "2", "--num-records", "4000", "--idle-seconds", "2", "--no-kafka"]
    assert main([*argv, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "lakelog  2 member(s):" in out and "0 delivered twice, 0 missing" in out
    assert "warm-up lap, 2 member(s), not counted: lakelog " in out and "(median of 3," in out
    assert "lakelog idle group of 2 members: 0.0 Delta commits per minute" in out
    assert "kafka" not in out  # --no-kafka: no broker side


@pytest.mark.spark
def test_perf_produce_and_consume_compare_with_plain_delta(spark, tmp_path, capsys):
    store = str(tmp_path / "perf")
    code = main(
        [
            "--store",
            store,
            "perf",
            "produce",
            "--num-records",
            "3000",
            "--batch-size",
            "1000",
            "--partitions",
            "3",
            "--keys",
            "10",
            "--compare-plain",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "lakelog:     3000 records sent" in out and "plain delta: 3000 records sent" in out
    assert "throughput ratio lakelog/plain delta:" in out
    code = main(
        ["--store", store, "perf", "produce", "--num-records", "500", "--batch-size", "100", "--api", "producer"]
    )
    assert code == 0 and "500 records sent" in capsys.readouterr().out
    code = main(
        [
            "--store",
            store,
            "perf",
            "produce",
            "--num-records",
            "300",
            "--batch-size",
            "100",
            "--api",
            "producer",
            "--keys",
            "7",
            "--compare-plain",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "plain delta: 300 records sent" in out
    code = main(["--store", store, "perf", "consume", "--partition", "0", "--repeats", "1", "--compare-plain"])
    out = capsys.readouterr().out
    assert code == 0 and "data.consumed.in.nMsg" in out and "throughput ratio" in out


def test_the_jvm_free_clients_are_set_beside_delta_rs_and_start_no_jvm(tmp_path):
    # The producer, the group consumer and transactions are compared with delta-rs appends and
    # reads of the same rows: like for like, no Spark job per batch on the plain side.
    script = """
import sys
from lakelog.cli import main
from pyspark import SparkContext
store = sys.argv[1]
for argv in (
    ["produce", "--api", "producer", "--num-records", "300", "--batch-size", "100", "--keys", "7", "--compare-plain"],
    ["consume", "--group", "perf", "--repeats", "1", "--compare-plain"],
    ["transactions", "--num-transactions", "3", "--compare-plain"],
):
    assert main(["--store", store, "perf", *argv]) == 0, argv
assert SparkContext._active_spark_context is None, "a JVM was started"
"""
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "perf")], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "plain delta: 300 records sent" in run.stdout and run.stdout.count("throughput ratio") == 2
    assert "data.consumed.in.nMsg" in run.stdout
    assert "lakelog transaction: 3 commits of 10 records" in run.stdout and "plain delta: 3 commits" in run.stdout


def test_the_quickstart_command_exits_cleanly_every_time(tmp_path):
    # The README's first command ends in this process; a native thread left running at
    # interpreter exit (a pyarrow dataset scan) once made it abort about one run in three.
    import subprocess
    import sys

    for run in range(4):
        done = subprocess.run(
            [sys.executable, "-m", "lakelog.cli", "--store", str(tmp_path / "qs"), "quickstart"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"run {run}: {done.returncode} {done.stderr[-2000:]}"
        assert "read as a plain Delta table (delta-rs): 9 rows" in done.stdout


def test_producer_performance_summaries_are_read_and_a_failed_run_is_named():
    from benchmarks.producer_perf import parse_summary

    output = (
        "50 records sent, 9.9 records/sec (0.00 MB/sec), 3.1 ms avg latency, 40.0 ms max latency.\n"
        "1000000 records sent, 5421.082590 records/sec (0.52 MB/sec), 19036.06 ms avg latency, 31671.00 ms max "
        "latency, 20948 ms 50th, 30691 ms 95th, 31401 ms 99th, 31645 ms 99.9th.\n"
    )
    figures = parse_summary(output)
    assert (figures["sent"], figures["rps"], figures["p50"], figures["p99"]) == (1_000_000, 5421.08259, 20948, 31401)
    with pytest.raises(ValueError, match="no summary"):
        parse_summary("Exception in thread main: TimeoutException")
    # With --warmup-records the tool adds the steady state's line (Kafka 4.3.1's wording): that one counts.
    warmed = output + (
        "200000 steady state records sent, 101163.378857 records/sec (9.65 MB/sec), 1115.84 ms avg latency, "
        "1354.00 ms max latency, 1115 ms 50th, 1327 ms 95th, 1348 ms 99th, 1353 ms 99.9th.\n"
    )
    figures = parse_summary(warmed)
    assert (figures["sent"], figures["rps"], figures["p50"], figures["p99"]) == (200_000, 101163.378857, 1115, 1348)


def test_a_proc_stat_line_gives_cpu_seconds_and_nice_value_whatever_the_command_name():
    from benchmarks.agent_cpu import _CLOCK_TICKS, ThreadTimes, background_s, parse_stat

    # Fields after the name: state, ppid, ... utime (14), stime (15), ..., nice (19).
    tail = "S 1 2 3 4 5 6 7 8 9 10 {u} {s} 13 14 15 {nice} 1 0 100 200 300"
    line = "4321 (tokio (rt) worker) " + tail.format(u=3 * _CLOCK_TICKS, s=_CLOCK_TICKS, nice=10)
    assert parse_stat(line) == ThreadTimes(4.0, 10)
    with pytest.raises(ValueError, match="not a /proc stat line"):
        parse_stat("4321 (python) S 1 2")
    before = {1: ThreadTimes(5.0, 0), 2: ThreadTimes(1.0, 10)}
    after = {1: ThreadTimes(9.0, 0), 2: ThreadTimes(1.5, 10), 3: ThreadTimes(2.0, 10), 4: ThreadTimes(3.0, -5)}
    # Only the lower-priority threads, each from its first sample (a new one from nothing).
    assert background_s(before, after, process_nice=0) == 2.5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_agent_cpu_sampler_tells_a_lower_priority_threads_cpu_apart():
    import os
    import threading
    import time

    from benchmarks.agent_cpu import AgentCpuSampler

    sampler = AgentCpuSampler(os.getpid()).start()
    burned, release = threading.Event(), threading.Event()

    def background() -> None:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + 5)
        started = time.thread_time()
        while time.thread_time() - started < 0.5:
            pass
        burned.set()
        release.wait(30)  # still alive when the sampler stops

    thread = threading.Thread(target=background)
    thread.start()
    assert burned.wait(60)
    cpu = sampler.stop()
    release.set()
    thread.join()
    assert cpu is not None
    # /proc counts in clock ticks (10 ms): 0.5 s of the thread's CPU is at least 0.45 s there.
    assert 0.45 <= cpu.background_s <= cpu.total_s
    assert 0 < cpu.background_share <= 1


def test_the_seconds_after_a_warm_up_are_those_that_began_once_its_records_were_acknowledged():
    from benchmarks.producer_perf import rates_after

    def window(sent: int, rate: float) -> str:
        return f"{sent} records sent, {rate} records/sec (9.5 MB/sec), 2762.5 ms avg latency, 2829.0 ms max latency.\n"

    output = (
        "Warmup first 250 records. Steady state results will print after the complete test summary.\n"
        + window(100, 100.0)
        + window(200, 200.0)  # 300 acknowledged by its end: the warm-up's last records in it
        + window(300, 300.5)
        + window(400, 400.0)
        + "1000 records sent, 250.0 records/sec (0.02 MB/sec), 1.0 ms avg latency, 2.0 ms max latency, "
        "1 ms 50th, 2 ms 95th, 2 ms 99th, 2 ms 99.9th.\n"
    )
    assert rates_after(output, 250) == [300.5, 400.0]
    assert rates_after(output, 300) == [300.5, 400.0]  # the window that began at 300 counts
    assert rates_after(output, 0) == [100.0, 200.0, 300.5, 400.0]
    assert rates_after(output, 1001) == []


def test_perf_producer_perf_refuses_a_warm_up_that_leaves_nothing_to_measure(tmp_path, capsys):
    argv = ["perf", "producer-perf", "--num-records", "3000", "--warmup-records", "3000", "--work-dir", str(tmp_path)]
    assert main(argv) != 0
    assert "--warmup-records 3000 leaves none of --num-records 3000 to measure" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.kafka
def test_perf_producer_perf_runs_kafkas_tool_against_the_agent_and_a_broker(tmp_path, capsys, monkeypatch):
    from benchmarks.kafka_reference import KafkaBroker

    started = []
    real_start = KafkaBroker.start
    monkeypatch.setattr(KafkaBroker, "start", lambda self: started.append(self) or real_start(self))
    argv = ["perf", "producer-perf", "--num-records", "3000", "--warmup-records", "1000", "--work-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert len(started) == 2  # one broker per broker side; none idles beside the agent
    # Three sides: the agent, the broker's defaults and its durable baseline (flush.messages=1).
    assert out.count("run 1: ") == 3 and "ratio lakelog/kafka: throughput " in out
    assert "ratio lakelog/kafka flush=1: throughput " in out
    assert "the Java producer's defaults (idempotent, acks=all)" in out
    assert "each on a new agent or a new broker" in out
    assert "the first 1,000 records of each run are its warm-up, not counted" in out
    # The steady state's figures, on every side: the 2,000 records after the warm-up.
    for side in ("lakelog serve", "kafka", "kafka flush=1"):
        assert out.count(f"run 1: {side:<13} 2,000 records, ") == 1, side
    # The agent's CPU over its run, and its checkpoints' part, on its side only (run and medians).
    agent_lines = [line for line in out.splitlines() if "; agent CPU " in line]
    assert len(agent_lines) == 2 and all("lakelog serve" in line for line in agent_lines)
    assert all(re.search(r"agent CPU [\d.]+ s, of it checkpoints [\d.]+ s \(\d+%\)", line) for line in agent_lines)
    # Too short a run for a whole second after its warm-up: said so on every side, and no ratio of them.
    assert out.count("seconds after the warm-up: median none (no whole second after it)") >= 3
    assert "; seconds after the warm-up " not in out
    assert list(tmp_path.iterdir()) == []


def test_a_group_is_settled_when_its_members_own_every_partition_once():
    from benchmarks.rebalance import settled

    everything = {"t-0", "t-1", "t-2"}
    assert settled([{"t-0"}, {"t-1", "t-2"}], everything)
    assert not settled([{"t-0", "t-1", "t-2"}, set()], everything)  # a member still without partitions
    assert not settled([{"t-0", "t-1"}, {"t-1", "t-2"}], everything)  # t-1 owned twice (not yet revoked)
    assert not settled([{"t-0"}, {"t-1"}], everything)  # t-2 unowned


@pytest.mark.kafka
@pytest.mark.slow
def test_perf_rebalance_times_java_members_settling_on_the_agent_and_a_broker(tmp_path, capsys):
    argv = ["perf", "rebalance", "--members", "3", "--partitions", "6", "--repeat", "1", "--work-dir", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "round 1: lakelog settled " in out and "round 1: kafka   settled " in out
    assert "ratio lakelog/kafka: " in out
    assert list(tmp_path.iterdir()) == []


def test_the_streams_workload_is_seeded_and_counts_every_word_of_its_lines():
    from collections import Counter

    from benchmarks.streams import workload

    load = workload(200, 5, 30)
    assert len(load.lines) == 200 and {len(line.split()) for line in load.lines} == {5}
    assert load.counts == Counter(word.decode() for line in load.lines for word in line.split())
    assert len(load.counts) == 30 and workload(200, 5, 30) == load
    assert workload(200, 5, 30, seed=32) != load


@pytest.mark.kafka
@pytest.mark.slow
def test_perf_streams_times_a_word_count_under_exactly_once_on_the_agent_and_a_broker(tmp_path, capsys):
    argv = ["perf", "streams", "--lines", "3000", "--rounds", "1", "--warmup-lines", "300"]
    assert main([*argv, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "warm-up: lakelog " in out and "warm-up: kafka   " in out
    assert "round 1: lakelog " in out and "round 1: kafka   " in out
    assert "exactly_once_v2" in out and "ratio lakelog/kafka: " in out
    assert list(tmp_path.iterdir()) == []


def test_security_ratios_compare_each_sides_tls_cost_with_the_other():
    from benchmarks.serve_security import security_ratios, verdict, within_target

    def figures(rps: float, p99: float) -> dict[str, float]:
        return {"produce_rps": rps, "produce_p50": 1.0, "produce_p99": p99}

    medians = {
        "lakelog": {"PLAINTEXT": figures(10_000, 20), "SASL_SSL": figures(8_000, 30)},
        "kafka": {"PLAINTEXT": figures(50_000, 4), "SASL_SSL": figures(40_000, 5)},
    }
    ratios = security_ratios(medians)
    assert ratios["lakelog_rps"] == pytest.approx(0.8) and ratios["kafka_rps"] == pytest.approx(0.8)
    assert ratios["lakelog_p99"] == pytest.approx(1.5) and ratios["kafka_p99"] == pytest.approx(1.25)
    assert ratios["relative_rps"] == pytest.approx(1.0) and ratios["relative_p99"] == pytest.approx(1.2)
    assert within_target(ratios["relative_rps"]) and within_target(1.2) and not within_target(1.21)
    assert "relative_rps" not in security_ratios({"lakelog": medians["lakelog"]})  # --no-kafka
    assert verdict(1.9, higher_is_cheaper=True).endswith("costs lakelog less than kafka")
    assert verdict(1.3, higher_is_cheaper=False).endswith("costs lakelog MORE")
    assert verdict(0.7, higher_is_cheaper=True).endswith("costs lakelog MORE")


@pytest.mark.kafka
@pytest.mark.slow
def test_perf_serve_security_compares_sasl_ssl_with_plaintext_on_the_agent_and_a_broker(tmp_path, capsys):
    import re

    argv = ["perf", "serve", "--security", "--num-records", "2000", "--rate", "200", "--seconds", "1"]
    assert main([*argv, "--repeat", "3", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for side in ("lakelog", "kafka  "):
        for protocol in ("PLAINTEXT", "SASL_SSL"):
            assert len(re.findall(rf"round \d: {side} {protocol} +produce", out)) == 3, out
    rates = [float(r.replace(",", "")) for r in re.findall(r"^  .* produce +([\d,]+) rec/s", out, re.M)]
    assert len(rates) == 4 and all(r > 100 for r in rates), out
    p99s = [float(p) for p in re.findall(r"^  .* p50/p99 [\d.]+/([\d.]+) ms", out, re.M)]
    assert len(p99s) == 4 and all(0 < p < 10_000 for p in p99s), out
    for side in ("lakelog serve", "kafka 4.x    "):
        ratio = re.search(rf"{side} SASL_SSL/PLAINTEXT: throughput ([\d.]+), p99 ([\d.]+)", out)
        assert ratio is not None and 0 < float(ratio.group(1)) < 10 and 0 < float(ratio.group(2)) < 100, out
    relative = re.search(r"lakelog's ratio / kafka's: throughput ([\d.]+) \((within|outside) ±20 %.*\), p99", out)
    assert relative is not None and float(relative.group(1)) > 0, out
    assert list(tmp_path.iterdir()) == []  # stores, certificates and the broker's directory are gone


def test_perf_serve_rounds_rotate_which_side_goes_first():
    from benchmarks.serve import side_order

    sides = ["lakelog", "main", "kafka", "kafka flush=1"]
    orders = [side_order(sides, r) for r in range(4)]
    assert [o[0] for o in orders] == sides  # each side first once in as many rounds
    assert all(sorted(o) == sorted(sides) for o in orders)
    assert side_order(sides, 4) == sides


def test_perf_serve_measures_another_checkouts_agent_as_a_side_of_its_own(tmp_path, capsys):
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    argv = ["perf", "serve", "--latency-only", "--no-kafka", "--rate", "200", "--seconds", "1", "--repeat", "2"]
    argv += ["--warmup-seconds", "0.5"]
    assert main([*argv, "--agent", f"other={root}", "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "200 rec/s for 1 s after 0.5 s of warm-up (not counted), one partition" in out, out
    rounds = re.findall(r"^round (\d): (\S+) +at fixed rate: produce p50/p99 [\d.]+/[\d.]+ ms, end-to-end", out, re.M)
    assert rounds == [("1", "lakelog"), ("1", "other"), ("2", "other"), ("2", "lakelog")], out
    for side in ("lakelog", "other"):
        medians = rf"^  {side} +at fixed rate: .* seen after ack p50/p99 -?[\d.]+/-?[\d.]+ ms, load [\d.]+$"
        assert re.search(medians, out, re.M), out
    assert "produce_rps" not in out and "rec/s, fetch" not in out  # --latency-only: no throughput runs
    assert list(tmp_path.iterdir()) == []
    assert main([*argv, "--agent", f"other={tmp_path}"]) != 0  # not a lakelog source tree
    assert "--agent takes LABEL=PATH" in capsys.readouterr().err


@pytest.mark.kafka
@pytest.mark.slow
def test_perf_serve_measures_the_broker_by_default_and_on_a_topic_flushed_after_every_append(
    tmp_path, capsys, monkeypatch
):
    import re

    from benchmarks.kafka_reference import KafkaBroker

    alive, at_start = [0], []  # brokers running; how many ran when each started
    real_start, real_stop = KafkaBroker.start, KafkaBroker.stop

    def start(self):
        at_start.append(alive[0])
        started = real_start(self)
        alive[0] += 1
        return started

    def stop(self):
        if self.running:
            alive[0] -= 1
        real_stop(self)

    monkeypatch.setattr(KafkaBroker, "start", start)
    monkeypatch.setattr(KafkaBroker, "stop", stop)
    argv = [
        "perf",
        "serve",
        "--latency-only",
        "--rate",
        "200",
        "--seconds",
        "1",
        "--repeat",
        "1",
        "--warmup-seconds",
        "0",
    ]
    assert main([*argv, "--work-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for side in ("lakelog", "kafka", "kafka flush=1"):
        assert re.search(rf"^  {side} +at fixed rate: produce p50/p99 [\d.]+/[\d.]+ ms", out, re.M), out
    assert "ratios lakelog/kafka flush=1: produce_p50 " in out, out
    assert at_start == [0, 0] and alive == [0]  # a new broker for each broker side's round, one at a time
    assert list(tmp_path.iterdir()) == []
