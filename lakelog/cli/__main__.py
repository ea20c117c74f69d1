"""``python -m lakelog.cli``: the ``lakelog`` command."""

from __future__ import annotations

import sys

from lakelog.cli import main

sys.exit(main())
