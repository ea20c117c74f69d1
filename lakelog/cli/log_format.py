"""Log lines as JSON objects, one per line (``lakelog serve --log-format json``), for a log
pipeline to index: time, level, logger, message and, when the line is about a connection, the
client's id and host, its principal and the listener (``extra=`` fields of the record). The
message is the one secrets were already taken out of (:func:`engine.settings.redact_logs`)."""

from __future__ import annotations

import datetime as dt
import json
import logging

# Fields lakelog's log calls attach with ``extra=`` that are worth a key of their own.
CONTEXT_FIELDS = ("client_id", "client_host", "principal", "listener", "api")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``{"time", "level", "logger", "message", ...context, "error"}``."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = str(value)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def use_json_logs() -> None:
    """Every handler of the root logger writes JSON lines from now on."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(JsonFormatter())
