from __future__ import annotations

import pytest

from lakelog.engine.config import ConfigKey, key_table, resolve_config
from lakelog.engine.errors import InvalidConfigError

KEYS = key_table(
    [
        ConfigKey("linger.ms", "long", 5, "", minimum=0),
        ConfigKey("acks", "enum", "all", "", choices=("all", "-1")),
        ConfigKey("flag", "bool", False, ""),
        ConfigKey("policy", "list", ("delete",), "", choices=("delete", "compact")),
        ConfigKey("ratio", "double", 0.5, "", minimum=0, maximum=1),
        ConfigKey("name", "string", "", ""),
    ]
)


def test_defaults_fill_unset_keys():
    assert resolve_config(KEYS, {"linger.ms": "7"}, what="x") == {
        "linger.ms": 7,
        "acks": "all",
        "flag": False,
        "policy": ("delete",),
        "ratio": 0.5,
        "name": "",
    }


def test_underscore_spelling_is_accepted():
    assert resolve_config(KEYS, {"linger_ms": 9}, what="x")["linger.ms"] == 9


def test_typed_values_parse_from_strings():
    got = resolve_config(KEYS, {"flag": "TRUE", "policy": "compact,delete", "ratio": "0.25", "acks": "ALL"}, what="x")
    assert got["flag"] is True
    assert got["policy"] == ("compact", "delete")
    assert got["ratio"] == 0.25
    assert got["acks"] == "all"


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ({"nope": 1}, "unknown x key 'nope'"),
        ({"linger.ms": -1}, "'linger.ms': must be at least 0"),
        ({"linger.ms": "soon"}, "must be an integer"),
        ({"linger.ms": True}, "must be an integer"),
        ({"acks": "1"}, "must be one of all, -1"),
        ({"flag": "yes"}, "must be true or false"),
        ({"policy": "delete,shred"}, "'shred' is not one of"),
        ({"policy": "delete,delete"}, "lists an item twice"),
        ({"ratio": 2}, "must be at most 1"),
        ({"name": 5}, "must be a string"),
        ({"linger.ms": 2**63}, "does not fit in a long"),
    ],
)
def test_bad_input_names_the_key(given, fragment):
    with pytest.raises(InvalidConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        resolve_config(KEYS, given, what="x")


@pytest.mark.parametrize("given", [["linger.ms=5"], "linger.ms=5", [("linger.ms", 5)]])
def test_a_config_that_is_not_a_mapping_is_a_named_error(given):
    with pytest.raises(InvalidConfigError, match=r"topic config must be a mapping of key to value, got (list|str)"):
        resolve_config(KEYS, given, what="topic config")
