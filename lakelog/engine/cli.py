"""The ``lakelog`` command line moved to :mod:`lakelog.cli` (one module per tool); this module keeps
``python -m lakelog.engine.cli`` and the old imports working."""

from __future__ import annotations

import sys

from lakelog.cli import build_parser, main
from lakelog.cli.common import split_configs as _split_configs
from lakelog.cli.produce import committed_ranges, produce_outcome

__all__ = ["_split_configs", "build_parser", "committed_ranges", "main", "produce_outcome"]

if __name__ == "__main__":
    sys.exit(main())
