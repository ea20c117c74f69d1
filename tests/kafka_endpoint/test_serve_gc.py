"""The agent's garbage collector: what exists at start is frozen, collections come less often
(in a process of its own: freezing is process-wide)."""

from __future__ import annotations

import json
import subprocess
import sys

from lakelog.kafka_endpoint.server import SERVE_GC_THRESHOLDS


def test_serving_freezes_what_exists_and_collects_at_the_serving_thresholds():
    script = (
        "import gc, json\n"
        "from lakelog.kafka_endpoint.server import collect_garbage_for_serving\n"
        "before = (gc.get_threshold(), gc.get_freeze_count())\n"
        "collect_garbage_for_serving()\n"
        "print(json.dumps([before, (gc.get_threshold(), gc.get_freeze_count())]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    (thresholds_before, frozen_before), (thresholds, frozen) = json.loads(done.stdout)
    assert frozen_before == 0 and tuple(thresholds_before) == (700, 10, 10)
    assert tuple(thresholds) == SERVE_GC_THRESHOLDS and frozen > 10_000  # the imported modules' objects
