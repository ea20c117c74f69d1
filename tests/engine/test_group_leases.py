"""Member leases off the Delta log, on a local directory and on the loopback S3 server, and the
observer-clock liveness rule (no Spark)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lakelog.engine.groups.leases import Lease, LeaseStore, Liveness, fresh
from lakelog.store import Store


@pytest.fixture(params=["local", "s3"])
def uri(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "store")
    return request.getfixturevalue("s3_uri")


def test_leases_are_renewed_read_and_removed_beside_the_table_not_in_it(uri):
    store = Store.open(uri)
    version = store.log.latest_version()
    leases = LeaseStore(uri, "group/with odd:chars")
    assert leases.read() == {}
    leases.renew("m-1", None)
    leases.renew("m 2", "instance-a")
    first = leases.read()
    assert set(first) == {"m-1", "m 2"} and all(isinstance(v, Lease) for v in first.values())
    time.sleep(1.1)  # S3's LastModified has whole seconds
    leases.renew("m-1", None)
    second = leases.read()
    assert second["m-1"].token != first["m-1"].token and second["m 2"].token == first["m 2"].token
    assert fresh(second, {"m-1": 60_000, "m 2": 60_000, "m-3": 60_000}, int(time.time() * 1000)) == {"m-1", "m 2"}
    leases.remove("m 2")
    leases.remove("never-there")
    assert set(leases.read()) == {"m-1"}
    assert store.log.latest_version() == version  # no Delta commit for any of it
    leases.remove_all()
    assert leases.read() == {}
    assert store.log.latest_version() == version


def test_a_member_is_silent_only_after_the_observer_saw_its_lease_unchanged_for_its_session():
    seen = Liveness()
    members = {"a": 5_000, "b": 5_000, "gone": 5_000}
    lease = {"a": Lease("a", 0, "t1"), "b": Lease("b", 0, "t1")}
    seen.observe(lease, members, 100.0)
    assert seen.silent(members, 104.0) == []
    seen.observe({"a": Lease("a", 0, "t2"), "b": lease["b"]}, members, 104.0)  # a renewed, b did not
    assert seen.silent(members, 105.5) == ["b", "gone"]  # no lease at all counts from the first look
    assert seen.silent(members, 108.0) == ["b", "gone"]
    assert seen.silent(members, 109.5) == ["a", "b", "gone"]
    seen.observe({}, {"a": 5_000}, 110.0)  # members that left the group are forgotten
    assert seen.silent({"b": 5_000}, 200.0) == []


def test_a_member_that_joined_after_the_observer_first_looked_gets_its_whole_session_before_its_first_lease():
    """A member is in the group from its JoinGroup's commit; its first lease is written after it.
    An observer that has watched the group for longer than a session and reads the group between
    the two must not take the newcomer for silent (it did: it counted the missing lease from its own
    first look, and the newcomer was dropped within milliseconds)."""
    seen = Liveness()
    seen.observe({"a": Lease("a", 0, "t1")}, {"a": 5_000}, 100.0)
    members = {"a": 5_000, "new": 5_000}
    seen.observe({"a": Lease("a", 0, "t2")}, members, 110.0)  # "new" joined; no lease of it yet
    assert seen.silent(members, 110.0) == []
    assert seen.silent(members, 114.5) == []
    seen.observe({"a": Lease("a", 0, "t3"), "new": Lease("new", 0, "n1")}, members, 111.0)  # its first lease
    assert seen.silent(members, 115.5) == []
    assert seen.silent(members, 116.5) == ["a", "new"]  # neither renewed since


def test_a_newcomer_that_never_writes_a_lease_is_silent_a_session_after_the_observer_first_saw_it():
    seen = Liveness()
    seen.observe({}, {"a": 5_000}, 100.0)
    seen.observe({}, {"a": 5_000, "ghost": 5_000}, 110.0)
    assert seen.silent({"a": 5_000, "ghost": 5_000}, 114.9) == ["a"]
    assert seen.silent({"a": 5_000, "ghost": 5_000}, 115.1) == ["a", "ghost"]


def test_ids_too_long_for_a_file_name_get_a_short_name_of_their_own_on_every_store(uri):
    """Group and member ids longer than a path component may be (255 bytes locally, 1,024 bytes for
    a whole S3 key) are named by a prefix and their SHA-256; shorter ones keep their quoted names."""
    store = Store.open(uri)
    version = store.log.latest_version()
    long_group, other_group = "g" * 5_000, "g" * 4_999 + "h"
    long_member, odd_member = "m\u00e9" * 2_000, "m/" * 200 + "="
    leases = LeaseStore(uri, long_group)
    leases.renew(long_member, "instance")
    leases.renew(odd_member, None)
    leases.renew("short", None)
    assert set(leases.read()) == {long_member, odd_member, "short"}
    assert LeaseStore(uri, other_group).read() == {}  # a group sharing the long prefix is another group
    leases.remove(odd_member)
    assert set(leases.read()) == {long_member, "short"}
    assert LeaseStore(uri, "g").read() == {}
    if "://" not in uri:
        names = [p.name for p in (Path(uri) / "_lakelog").rglob("*")]
        assert names and max(len(n.encode()) for n in names) <= 130
        assert "short.json" in names  # ids that fit keep the names they always had
    leases.remove_all()
    assert leases.read() == {}
    assert store.log.latest_version() == version
