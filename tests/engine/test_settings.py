"""Layered settings: conf/lakelog.conf, a settings file, LAKELOG_* variables, keyword arguments."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from lakelog.cli import main as cli_main
from lakelog.conf import conf_path, parse_properties
from lakelog.engine.errors import InvalidConfigError
from lakelog.engine.settings import PREFIXED_KEYS, STORE_KEYS, load_settings, redact_logs, reference_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_later_layers_win_file_then_environment_then_arguments(tmp_path):
    user = tmp_path / "site.conf"
    user.write_text(
        "# a site's settings\nnum.partitions 4\nproducer.linger.ms=50\ntopic.retention.ms 1000\n"
        "spark.sql.shuffle.partitions 3\nconsumer.max.poll.records 7\n"
    )
    env = {"LAKELOG_PRODUCER_LINGER_MS": "20", "LAKELOG_CONSUMER_AUTO_OFFSET_RESET": "earliest", "HOME": "/x"}
    s = load_settings(user, env, {"num_partitions": 6, "consumer.max.poll.records": 9})
    assert s.num_partitions == 6 and s.origins["num.partitions"] == "argument num_partitions"
    assert (
        s.producer["linger.ms"] == 20
        and s.origins["producer.linger.ms"] == "environment variable LAKELOG_PRODUCER_LINGER_MS"
    )
    assert s.consumer == {
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "session.timeout.ms": 45_000,
        "isolation.level": "read_committed",
        "max.poll.records": 9,
    }
    assert s.topic == {"retention.ms": 1000} and s.origins["topic.retention.ms"] == str(user)
    assert s.spark == {"spark.sql.shuffle.partitions": "3"}
    # the file can also come from LAKELOG_CONF_FILE
    assert load_settings(None, {"LAKELOG_CONF_FILE": str(user)}).num_partitions == 4


@pytest.mark.parametrize(
    ("conf_text", "env", "args", "message"),
    [
        ("num.partitons 3\n", {}, {}, "unknown setting 'num.partitons'"),
        ("", {"LAKELOG_PRODUCER_LINGER": "5"}, {}, "unknown setting 'producer.linger' (from environment variable"),
        ("", {}, {"producer.lingerms": 5}, "unknown setting 'producer.lingerms' (from argument producer.lingerms)"),
        ("", {}, {"colour": "red"}, "unknown setting 'colour'"),
        ("num.partitions 0\n", {}, {}, "'num.partitions': must be at least 1 (from "),
        ("", {"LAKELOG_TOPIC_CLEANUP_POLICY": "shred"}, {}, "'cleanup.policy'"),
        ("", {"LAKELOG_CONSUMER_AUTO_OFFSET_RESET": "middle"}, {}, "LAKELOG_CONSUMER_AUTO_OFFSET_RESET"),
        ("", {"LAKELOG_SPARK_MASTER": "local[1]"}, {}, "Spark settings cannot come from the environment"),
        ("", {}, {"producer.acks": 1}, "'acks'"),
    ],
)
def test_unknown_keys_and_bad_values_are_errors_naming_key_and_origin(tmp_path, conf_text, env, args, message):
    user = tmp_path / "site.conf"
    user.write_text(conf_text)
    with pytest.raises(InvalidConfigError) as caught:
        load_settings(user, env, args)
    assert message in str(caught.value)


def test_a_missing_settings_file_is_named(tmp_path):
    with pytest.raises(InvalidConfigError, match=r"settings file .*nope.conf.* does not exist"):
        load_settings(tmp_path / "nope.conf", {})


def test_variables_that_are_not_settings_are_left_alone():
    env = {"LAKELOG_STORE": "/s", "LAKELOG_TEST_SEED": "3", "LAKELOG_JARS_DIR": "/jars"}
    assert load_settings(None, env).jars_dir == "/jars"


def test_the_shipped_file_states_the_built_in_defaults():
    text = conf_path("lakelog.conf").read_text()
    active = parse_properties(text)
    commented = dict(re.findall(r"^#\s*((?:topic|producer|consumer)\.\S+)\s+(\S+)\s*$", text, re.MULTILINE))
    assert active and commented
    for key, value in {**active, **commented}.items():
        if key in STORE_KEYS:
            spec = STORE_KEYS[key]
        else:
            prefix = next(p for p in PREFIXED_KEYS if key.startswith(p))
            spec = PREFIXED_KEYS[prefix][0][key.removeprefix(prefix)]
        assert spec.parse(value) == spec.default, key


def test_the_readme_reference_table_lists_every_key_as_the_code_defines_it():
    assert reference_table() in README.read_text(), "run `lakelog config --reference` and paste it into README.md"


def test_cli_config_shows_values_and_origins(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LAKELOG_NUM_PARTITIONS", "3")
    assert cli_main(["config"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["num.partitions"] == ["3", "environment", "variable", "LAKELOG_NUM_PARTITIONS"]
    assert rows["producer.linger.ms"][0] == "5" and rows["producer.linger.ms"][1].endswith("lakelog.conf")
    monkeypatch.setenv("LAKELOG_NUM_PARTITIONS", "many")
    assert cli_main(["config"]) == 2
    assert "num.partitions" in capsys.readouterr().err
    assert cli_main(["config", "--reference"]) == 0
    assert capsys.readouterr().out.strip() == reference_table()


def test_cli_config_never_prints_secrets(tmp_path, capsys):
    secrets = {
        "spark.hadoop.fs.s3a.secret.key": "SECRET-VALUE-1",
        "spark.hadoop.fs.s3a.access.key": "ACCESS-VALUE-2",
        "spark.hadoop.fs.s3a.session.token": "TOKEN-VALUE-3",
        "spark.ssl.keyStorePassword": "PASSWORD-VALUE-4",
    }
    conf = tmp_path / "lakelog.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in secrets.items()) + "spark.hadoop.fs.s3a.endpoint=http://x:9000\n")
    assert cli_main(["--conf", str(conf), "config"]) == 0
    out = capsys.readouterr().out
    assert not any(value in out for value in secrets.values())
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert all(rows[key] == "*********(redacted)" for key in secrets)
    assert rows["spark.hadoop.fs.s3a.endpoint"] == "http://x:9000"  # the rest as it was


def test_no_log_line_of_a_cli_run_shows_a_secret(tmp_path, capsys, caplog, monkeypatch):
    conf = tmp_path / "lakelog.conf"
    conf.write_text("spark.hadoop.fs.s3a.secret.key=SECRET-VALUE-5\n")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "TOKEN-VALUE-6")
    assert cli_main(["--conf", str(conf), "-v", "config"]) == 0
    caplog.set_level(logging.INFO)
    log = logging.getLogger("lakelog.engine.commit")
    log.warning("S3 refused %s with %s", "s3a://b/t", "SECRET-VALUE-5")
    log.info("client built from fs.s3a.secret.key=inline-one, token: inline-two and TOKEN-VALUE-6")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "s3a://b/t" in text and "fs.s3a.secret.key=*********(redacted)" in text
    for secret in ("SECRET-VALUE-5", "TOKEN-VALUE-6", "inline-one", "inline-two"):
        assert secret not in text


def test_a_store_uri_with_credentials_is_shown_with_the_secret_masked(caplog):
    from lakelog.engine.settings import redact_text

    uri = "s3a://AKIDEXAMPLE:wJalrXUtn/K7MDENG+bPx@bucket/store"
    shown = redact_text(f"no lakelog store at {uri} (create one with `lakelog --store {uri} ...`)")
    assert "wJalrXUtn" not in shown and shown.count("s3a://AKIDEXAMPLE:*********(redacted)@bucket/store") == 2
    assert (
        redact_text("http://127.0.0.1:9000/bucket and s3a://bucket/key")
        == "http://127.0.0.1:9000/bucket and s3a://bucket/key"
    )
    redact_logs(load_settings(environ={}), environ={})
    logging.getLogger("lakelog.engine.commit").warning("opening %s", uri)
    assert "wJalrXUtn" not in caplog.records[-1].getMessage()


@pytest.mark.spark
def test_a_store_applies_its_settings_to_topics_producers_and_consumers(spark, tmp_path, monkeypatch):
    from lakelog.store import Store

    monkeypatch.setenv("LAKELOG_CONSUMER_AUTO_OFFSET_RESET", "earliest")
    store = Store.open(
        tmp_path / "s", spark=spark, num_partitions=3, **{"topic.retention.ms": 5000, "producer.client.id": "site"}
    )
    meta = store.create_topic("t")
    assert meta.partitions == 3 and meta.overrides["retention.ms"] == 5000
    assert store.create_topic("u", partitions=1, config={"retention.ms": 7}).overrides["retention.ms"] == 7
    with store.producer() as producer:
        producer.send("t", b"v", key=b"k").get()
    assert store.history_entries("t")[-1].client_id == "site"
    consumer = store.consumer("g", enable_auto_commit=False)  # auto.offset.reset=earliest from the environment
    consumer.subscribe(["t"])
    records = []
    for _ in range(20):
        records += consumer.poll(timeout_ms=500)
        if records:
            break
    consumer.close()
    assert [r.value for r in records] == [b"v"]
    with pytest.raises(InvalidConfigError, match=r"unknown setting 'num\.partitons'"):
        Store.open(tmp_path / "s", spark=spark, num_partitons=2)
    assert store.list_topics() == ["t", "u"]
