"""``lakelog perf ...``: benchmarks that measure lakelog side by side with a baseline
(plain Delta, pyarrow, delta-rs, a real Apache Kafka broker), interleaved in one run.

Kept apart from the runtime packages they measure: only the CLI's ``perf`` verbs
import from here.
"""
