# The two commands of the README:
#   make quickstart   install everything, then run the quickstart on a local store
#   make test         install everything, then lint and run the test suite
# Installing means: a virtualenv in .venv with lakelog and its Python
# dependencies, the compiled hot paths (Cython and the C compiler: the producer's
# send, lakelog/engine/produce/record_queue.pyx, the agent's record reader,
# lakelog/kafka_endpoint/record_columns.pyx, its data files' Parquet pages,
# lakelog/engine/commit/parquet_pages.pyx, and a commit's fsyncs,
# lakelog/engine/storage/parallel_sync.pyx), and lakelog's own JVM library
# compiled into lakelog/jvm/.
# Delta Lake's jars are resolved through Ivy into the user's cache the first
# time a SparkSession is built (or by `lakelog setup`); nothing goes to ~/.m2.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JVM_JAR := lakelog/jvm/lakelog-jvm.jar
JAVA_SOURCES := $(shell find jvm/src -type f)

.PHONY: setup quickstart test lint soak clean

setup: $(STAMP) $(JVM_JAR)

$(STAMP): pyproject.toml lakelog/engine/produce/record_queue.pyx lakelog/kafka_endpoint/record_columns.pyx \
		lakelog/engine/commit/parquet_pages.pyx lakelog/engine/storage/parallel_sync.pyx
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lakelog needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# PYTHONWARNINGS: setuptools' editable-install banner is advice for library authors, not news to a user.
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(JVM_JAR): $(STAMP) jvm/build_jar.py $(JAVA_SOURCES)
	$(PY) jvm/build_jar.py

quickstart: setup
	$(VENV)/bin/lakelog --store quickstart-store quickstart

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	$(PY) -m pytest -n 2 --dist loadscope --durations=30

# The randomized multi-process workload under SIGKILLs, checked for anomalies (tests/soak.py):
#   make soak SOAK_OPERATIONS=100000 SOAK_KILLS=50 [SOAK_S3=1] [SOAK_ARGS="--seed 7 --keep"]
SOAK_OPERATIONS ?= 50000
SOAK_KILLS ?= 25
SOAK_S3 ?=
SOAK_ARGS ?=

soak: setup
	$(PY) -m tests.soak --operations $(SOAK_OPERATIONS) --kills $(SOAK_KILLS) $(if $(filter 1 yes true,$(SOAK_S3)),--s3) $(SOAK_ARGS)

clean:
	rm -rf $(VENV) $(JVM_JAR) quickstart-store .pytest_cache build dist
