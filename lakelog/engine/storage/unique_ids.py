"""Ids that must never repeat -- data file names, temporary files, commit ``txnId`` s --
drawn without a system call.

Each is a random UUID (version 4) from a generator of this module's own, seeded from the
operating system when the module loads and again in a forked child. ``uuid.uuid4()`` reads
``os.urandom`` every time, and in ``lakelog serve`` each such call gives up the GIL and waits
to take it back behind the event loop (traced under Kafka's ProducerPerformance: ~30 us a call,
five calls per commit). A generator of its own, not ``random``'s: a program that seeds that one
(tests do) would make two processes draw the same names.
"""

from __future__ import annotations

import os
import random
import uuid

_generator = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_generator.seed)


def new_uuid() -> uuid.UUID:
    """A random (version 4) UUID: 122 random bits, as unlikely as ``uuid.uuid4()``'s to be drawn
    again by any call of any process (a forked child reseeds its generator)."""
    return uuid.UUID(int=_generator.getrandbits(128), version=4)
