"""Settings derivation and the S3 put-if-absent primitive, against the loopback S3 server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator

import pytest
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError
from py4j.protocol import Py4JJavaError

from lakelog.engine.errors import CommitStateUnknownError
from lakelog.engine.storage.object_store import (
    WRITE_ID_KEY,
    S3Settings,
    _s3_client,
    bucket_and_key,
    put_if_absent,
    python_uri,
    remove_tree,
    settings_for,
    settings_from_env,
    settings_from_hadoop,
)

pytestmark = pytest.mark.s3


def test_hadoop_settings_win_per_bucket_and_env_fills_the_rest():
    conf = {
        "fs.s3a.endpoint": "s3.example:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.bucket.special.endpoint": "https://special.example",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": "AK",
    }
    env = {"AWS_SECRET_ACCESS_KEY": "SK", "AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "http://ignored"}
    plain = settings_from_hadoop(conf.get, "plain", env)
    assert (plain.endpoint, plain.path_style, plain.allow_http) == ("http://s3.example:9000", True, True)
    assert (plain.access_key, plain.secret_key, plain.region) == ("AK", "SK", "eu-west-1")
    assert settings_from_hadoop(conf.get, "special", env).endpoint == "https://special.example"
    options = plain.delta_rs_options()
    assert options["AWS_ENDPOINT_URL"] == "http://s3.example:9000" and options["AWS_ALLOW_HTTP"] == "true"
    assert options["conditional_put"] == "etag"  # delta-rs' commits use If-None-Match too
    assert "SK" not in repr(plain)


def test_env_settings_are_the_aws_sdks():
    settings = settings_from_env({"AWS_ENDPOINT_URL_S3": "http://a:1", "AWS_ENDPOINT_URL": "http://b:2"})
    assert settings == S3Settings(endpoint="http://a:1", path_style=True)
    assert settings_from_env({}) == S3Settings()
    assert python_uri("s3a://b/x/y") == "s3://b/x/y" and bucket_and_key("s3a://b/x/y") == ("b", "x/y")


def test_put_if_absent_creates_once_and_never_overwrites(s3_server, s3_bucket):
    directory = f"s3a://{s3_bucket}/{uuid.uuid4().hex}/_delta_log"
    assert put_if_absent(directory, "00000000000000000000.json", b"first")
    assert not put_if_absent(directory, "00000000000000000000.json", b"second")
    _, prefix = bucket_and_key(directory)
    obj = s3_server.client().get_object(Bucket=s3_bucket, Key=f"{prefix}/00000000000000000000.json")
    assert obj["Body"].read() == b"first"
    assert WRITE_ID_KEY in obj["Metadata"]


def _jvm_write(spark, uri: str, lines: list[str]) -> None:
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    actions = jvm.java.util.ArrayList()
    for line in lines:
        actions.add(line)
    store = jvm.io.lakelog.storage.ConditionalS3LogStore(conf)
    store.write(jvm.org.apache.hadoop.fs.Path(uri), actions.iterator(), False, conf)


def test_jvm_and_python_commits_exclude_each_other(spark, s3_server, s3_bucket):
    """ConditionalS3LogStore (Delta's JVM commits) and put_if_absent (lakelog's Python commits)
    make the same conditional request: whichever comes second is refused."""
    directory = f"s3a://{s3_bucket}/{uuid.uuid4().hex}/_delta_log"
    _jvm_write(spark, f"{directory}/00000000000000000001.json", ['{"jvm":1}'])
    assert not put_if_absent(directory, "00000000000000000001.json", b"python")
    assert put_if_absent(directory, "00000000000000000002.json", b"python")
    with pytest.raises(Py4JJavaError) as refused:
        _jvm_write(spark, f"{directory}/00000000000000000002.json", ['{"jvm":2}'])
    assert "java.nio.file.FileAlreadyExistsException" in str(refused.value.java_exception.getClass().getName())
    _, prefix = bucket_and_key(directory)
    client = s3_server.client()

    def body(version: int) -> bytes:
        return client.get_object(Bucket=s3_bucket, Key=f"{prefix}/{version:020d}.json")["Body"].read()

    assert body(1) == b'{"jvm":1}\n' and body(2) == b"python"


@pytest.fixture
def no_retry_backoff(monkeypatch):
    """botocore sleeps between its retries (standard mode, 5 attempts): seconds per test, no meaning here."""
    import types

    import botocore.endpoint

    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda _seconds: None))


@contextlib.contextmanager
def on_put(directory: str, event: str, handler: Callable[..., None]) -> Iterator[None]:
    """Hook lakelog's own S3 client (botocore events) for PutObject requests only."""
    client = _s3_client(settings_for(directory))
    name = f"{event}.s3.PutObject"
    client.meta.events.register(name, handler)
    try:
        yield
    finally:
        client.meta.events.unregister(name, handler)


def _key(directory: str, name: str) -> str:
    return f"{bucket_and_key(directory)[1]}/{name}"


def test_a_lost_response_after_the_write_landed_is_a_success(s3_server, s3_bucket):
    """The request reached S3 and created the object, the answer never came back: a HEAD
    finds our write id on the object, so the commit is ours."""
    directory = f"s3a://{s3_bucket}/{uuid.uuid4().hex}/_delta_log"

    def lose_response(**_: object) -> None:
        raise ReadTimeoutError(endpoint_url="simulated: the response was lost")

    with on_put(directory, "after-call", lose_response):
        assert put_if_absent(directory, "00000000000000000000.json", b"ours")
    obj = s3_server.client().get_object(Bucket=s3_bucket, Key=_key(directory, "00000000000000000000.json"))
    assert obj["Body"].read() == b"ours"


def test_a_lost_request_while_another_writer_won_is_a_refusal(s3_server, s3_bucket, no_retry_backoff):
    """Our request never arrived and another writer created the file meanwhile: not ours, no error."""
    directory = f"s3a://{s3_bucket}/{uuid.uuid4().hex}/_delta_log"
    name = "00000000000000000000.json"

    def other_writer_then_drop(**_: object) -> None:
        s3_server.client().put_object(Bucket=s3_bucket, Key=_key(directory, name), Body=b"theirs")
        raise ConnectionClosedError(endpoint_url="simulated: connection dropped before sending")

    with on_put(directory, "before-send", other_writer_then_drop):
        assert not put_if_absent(directory, name, b"ours")
    obj = s3_server.client().get_object(Bucket=s3_bucket, Key=_key(directory, name))
    assert obj["Body"].read() == b"theirs"  # nothing overwritten


def test_a_failed_request_with_nothing_there_is_outcome_unknown(s3_server, s3_bucket, no_retry_backoff):
    """Every attempt failed and the key is absent: a request still in flight could land later,
    so this is CommitStateUnknownError (re-read the log), not "nothing committed"."""
    directory = f"s3a://{s3_bucket}/{uuid.uuid4().hex}/_delta_log"

    def drop(**_: object) -> None:
        raise ConnectionClosedError(endpoint_url="simulated: connection dropped")

    with on_put(directory, "before-send", drop), pytest.raises(CommitStateUnknownError, match="may still land"):
        put_if_absent(directory, "00000000000000000000.json", b"ours")
    listed = s3_server.client().list_objects_v2(Bucket=s3_bucket, Prefix=bucket_and_key(directory)[1])
    assert listed.get("KeyCount", 0) == 0


def test_remove_tree_deletes_one_prefix_only(s3_server, s3_bucket, tmp_path):
    run = uuid.uuid4().hex
    client = s3_server.client()
    for key in (f"{run}/work/a", f"{run}/work/b/c", f"{run}/work-other/d"):
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"x")
    remove_tree(f"s3a://{s3_bucket}/{run}/work")
    remove_tree(f"s3a://{s3_bucket}/{run}/absent")  # nothing there: no error
    left = [o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket, Prefix=run).get("Contents", [])]
    assert left == [f"{run}/work-other/d"]
    (tmp_path / "w" / "x").mkdir(parents=True)
    remove_tree(str(tmp_path / "w"))
    assert not (tmp_path / "w").exists()
