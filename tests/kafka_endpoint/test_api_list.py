"""The README's table of the APIs ``lakelog serve`` answers is the agent's own list: every API
key and version range ApiVersions reports, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from lakelog.kafka_endpoint.endpoint import SUPPORTED
from lakelog.kafka_endpoint.messages import api_name

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| (?P<name>[A-Za-z]+) \((?P<key>\d+)\) \| (?P<low>\d+)(?:–(?P<high>\d+))? \|")


def test_the_readme_lists_exactly_the_apis_and_versions_served():
    listed = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        found = ROW.match(line)
        if found:
            key = int(found["key"])
            assert key not in listed, f"API key {key} listed twice"
            listed[key] = (int(found["low"]), int(found["high"] or found["low"]))
            # The name is Kafka's (kio's snake case, in CamelCase).
            assert re.sub(r"(?<!^)(?=[A-Z])", "_", found["name"]).lower() == api_name(key, listed[key][0])
    assert listed == SUPPORTED
