"""Which part of a request the authorizer lets through and how it answers the rest, request by
request (no agent: kio requests handed to :class:`RequestAuthorizer` directly)."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from lakelog.engine.security.acls import AclBinding, AclStore
from lakelog.kafka_endpoint.authorization import RequestAuthorizer
from lakelog.kafka_endpoint.fetch import FETCH
from lakelog.kafka_endpoint.groups import CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_HEARTBEAT, JOIN_GROUP, OFFSET_FETCH
from lakelog.kafka_endpoint.listeners import Listener
from lakelog.kafka_endpoint.messages import Request, build, response_class
from lakelog.kafka_endpoint.produce import PRODUCE
from lakelog.kafka_endpoint.session import Session

ON = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:root"}


def request(api: int, version: int, principal: str = "User:carol", **body) -> Request:
    session = Session(Listener("SASL_SSL", "127.0.0.1", 9093), ("127.0.0.1", 9093), "10.0.0.1", principal)
    return Request(api, version, 1, "c", build(load_request_schema(api, version), **body), session)


@pytest.fixture
def authorizer(tmp_path):
    AclStore(str(tmp_path)).add(
        [
            AclBinding.of("TOPIC", "t", "LITERAL", "User:carol", "*", "READ", "ALLOW"),
            AclBinding.of("GROUP", "g", "LITERAL", "User:carol", "*", "READ", "ALLOW"),
        ]
    )
    return RequestAuthorizer(str(tmp_path), ON)


def fetch_topics(*names: str) -> list[dict]:
    return [{"topic": n, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]} for n in names]


def test_a_fetch_keeps_the_readable_topics_and_answers_the_others_refused(authorizer):
    decision = authorizer.decide(request(FETCH, 12, topics=fetch_topics("t", "other")))
    assert decision.answer is None
    assert [t.topic for t in decision.request.body.topics] == ["t"]
    handled = build(response_class(FETCH, 12), responses=[{"topic": "t", "partitions": [{"partition_index": 0}]}])
    answer = decision.complete(handled)
    codes = {(r.topic, p.partition_index): p.error_code for r in answer.responses for p in r.partitions}
    assert codes == {("t", 0): ErrorCode.none, ("other", 0): ErrorCode.topic_authorization_failed}


def test_a_produce_to_a_topic_only_readable_is_taken_out_whole(authorizer):
    data = [{"name": "t", "partition_data": [{"index": 0, "records": None}, {"index": 1, "records": None}]}]
    decision = authorizer.decide(request(PRODUCE, 9, acks=-1, timeout=1000, topic_data=data))
    assert decision.request.body.topic_data == ()  # nothing of it reaches the commit
    answer = decision.complete(build(response_class(PRODUCE, 9), responses=[]))
    assert [(p.index, p.error_code) for p in answer.responses[0].partition_responses] == [
        (0, ErrorCode.topic_authorization_failed),
        (1, ErrorCode.topic_authorization_failed),
    ]
    assert decision.complete(None) is None  # acks=0: no answer


def test_a_group_not_granted_refuses_the_whole_request(authorizer):
    join = {
        "group_id": "other",
        "session_timeout": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [],
    }
    assert authorizer.decide(request(JOIN_GROUP, 5, **join)).answer.error_code == ErrorCode.group_authorization_failed
    assert authorizer.decide(request(JOIN_GROUP, 5, **{**join, "group_id": "g"})).answer is None
    assert authorizer.decide(request(JOIN_GROUP, 5, "User:root", **join)).answer is None  # a super user


def test_the_kip848_apis_and_offset_fetch_of_several_groups_need_the_group(authorizer):
    """ConsumerGroupHeartbeat needs READ on its group, ConsumerGroupDescribe and OffsetFetch v8+
    DESCRIBE on every group named (READ implies DESCRIBE), as Kafka's KafkaApis checks."""
    beat = {"group_id": "other", "member_id": "m", "member_epoch": 0, "topic_partitions": []}
    refused = authorizer.decide(request(CONSUMER_GROUP_HEARTBEAT, 1, **beat)).answer
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert authorizer.decide(request(CONSUMER_GROUP_HEARTBEAT, 1, **{**beat, "group_id": "g"})).answer is None
    described = authorizer.decide(
        request(CONSUMER_GROUP_DESCRIBE, 0, group_ids=["g", "other"], include_authorized_operations=False)
    ).answer
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.group_authorization_failed),
        ("other", ErrorCode.group_authorization_failed),
    ]
    groups = [{"group_id": "other", "topics": None}]
    fetched = authorizer.decide(request(OFFSET_FETCH, 9, groups=groups)).answer
    assert [(g.group_id, g.error_code) for g in fetched.groups] == [("other", ErrorCode.group_authorization_failed)]
    assert authorizer.decide(request(OFFSET_FETCH, 9, groups=[{"group_id": "g", "topics": None}])).answer is None


def test_metadata_creates_a_missing_topic_only_for_a_principal_that_may_create_it(tmp_path):
    from lakelog.kafka_endpoint.admin import METADATA

    AclStore(str(tmp_path)).add(
        [
            AclBinding.of("TOPIC", "new-", "PREFIXED", "User:carol", "*", "DESCRIBE", "ALLOW"),
            AclBinding.of("TOPIC", "new-ok", "LITERAL", "User:carol", "*", "CREATE", "ALLOW"),
        ]
    )
    authorizer = RequestAuthorizer(str(tmp_path), ON, lambda: {"new-there": None}, auto_create=True)
    names = ["new-ok", "new-no", "new-there"]
    asked = request(METADATA, 12, topics=[{"name": n} for n in names], allow_auto_topic_creation=True)
    decision = authorizer.decide(asked)
    assert [t.name for t in decision.request.body.topics] == ["new-ok", "new-there"]
    answer = decision.complete(build(response_class(METADATA, 12), topics=[]))
    assert [(t.name, t.error_code) for t in answer.topics] == [("new-no", ErrorCode.topic_authorization_failed)]
    without = RequestAuthorizer(str(tmp_path), ON, lambda: {}, auto_create=False)
    assert without.decide(asked).request is asked  # nothing is created anyway: describing is enough


def test_without_an_authorizer_or_a_listener_nothing_changes(tmp_path):
    off = RequestAuthorizer(str(tmp_path), {})
    fetch = request(FETCH, 12, topics=fetch_topics("other"))
    assert off.decide(fetch).request is fetch
    on = RequestAuthorizer(str(tmp_path), ON)
    outside = Request(FETCH, 12, 1, "c", fetch.body)  # no session: a request made in-process
    assert on.decide(outside).request is outside
