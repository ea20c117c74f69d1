"""``import lakelog``: one namespace whose names load on first use, so importing it (and so starting any
shell command) loads neither the engine's dependencies nor PySpark."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import lakelog
assert not {"pyarrow", "deltalake", "pyspark"} & set(sys.modules), sorted(sys.modules)
from lakelog import Store, TransactionalProducer, maintain
from lakelog.store import Store as store_class
assert Store is store_class and callable(maintain) and TransactionalProducer.__name__ == "TransactionalProducer"
assert "pyspark" not in sys.modules, "maintain is imported without PySpark"
assert set(lakelog.__all__) <= set(dir(lakelog))
try:
    lakelog.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("an unknown name resolved")
print("ok")
"""


def test_import_lakelog_is_lazy_and_complete():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
