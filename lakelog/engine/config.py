"""Typed configuration keys with Kafka's flat dotted names.

A :class:`ConfigKey` describes one key (type, default, allowed range, doc);
:func:`resolve_config` turns user input -- strings from a CLI or typed Python
values -- into a validated ``dict`` and names the offending key in every
error. Topic and client configuration both go through here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.engine.errors import InvalidConfigError

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key.

    ``kind`` is one of ``int``, ``long``, ``double``, ``bool``, ``string``,
    ``enum`` (one of ``choices``) or ``list`` (comma-separated, each of
    ``choices`` when given).
    """

    name: str
    kind: str
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: Any) -> Any:
        """Return ``raw`` converted to this key's type, or raise InvalidConfigError."""
        value = self._convert(raw)
        if self.kind in ("int", "long", "double"):
            if self.minimum is not None and value < self.minimum:
                self._fail(raw, f"must be at least {_num(self.minimum)}")
            if self.maximum is not None and value > self.maximum:
                self._fail(raw, f"must be at most {_num(self.maximum)}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                self._fail(raw, problem)
        return value

    def _convert(self, raw: Any) -> Any:
        kind = self.kind
        if kind in ("int", "long"):
            if isinstance(raw, bool):
                self._fail(raw, "must be an integer")
            if isinstance(raw, int):
                value = raw
            elif isinstance(raw, str) and _is_int(raw.strip()):
                value = int(raw.strip())
            else:
                self._fail(raw, "must be an integer")
            limit = INT_MAX if kind == "int" else LONG_MAX
            if not -limit - 1 <= value <= limit:
                self._fail(raw, f"does not fit in a {kind}")
            return value
        if kind == "double":
            if isinstance(raw, bool):
                self._fail(raw, "must be a number")
            try:
                return float(raw)
            except (TypeError, ValueError):
                self._fail(raw, "must be a number")
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                return raw.strip().lower() == "true"
            self._fail(raw, "must be true or false")
        if kind == "string":
            if not isinstance(raw, str):
                self._fail(raw, "must be a string")
            return raw
        if kind == "enum":
            text = str(raw).strip()
            for choice in self.choices:
                if text.lower() == choice.lower():
                    return choice
            self._fail(raw, "must be one of " + ", ".join(self.choices))
        if kind == "list":
            items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
            values = [str(item).strip() for item in items if str(item).strip()]
            if self.choices:
                for item in values:
                    if item not in self.choices:
                        self._fail(raw, f"item {item!r} is not one of " + ", ".join(self.choices))
            if len(set(values)) != len(values):
                self._fail(raw, "lists an item twice")
            return tuple(values)
        raise AssertionError(f"unknown config kind {kind!r}")

    def _fail(self, raw: Any, problem: str) -> None:
        raise InvalidConfigError(f"invalid value {raw!r} for config {self.name!r}: {problem}")

    def render(self, value: Any) -> str:
        """Render a parsed value the way Kafka's tools print it."""
        if self.kind == "list":
            return ",".join(value)
        if self.kind == "bool":
            return "true" if value else "false"
        return str(value)


def _is_int(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isdigit()


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def key_table(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    """Index keys by name."""
    return {key.name: key for key in keys}


def normalize_name(name: str) -> str:
    """Accept ``linger_ms`` as a spelling of ``linger.ms`` (Python keyword arguments)."""
    return name.replace("_", ".")


def resolve_config(
    keys: Mapping[str, ConfigKey],
    given: Mapping[str, Any] | None,
    *,
    what: str,
    with_defaults: bool = True,
) -> dict[str, Any]:
    """Validate ``given`` against ``keys``; unknown keys are errors, never ignored.

    Returns the parsed values, with every other key at its default when
    ``with_defaults`` is true. ``what`` names the configuration in messages
    (``"topic config"``, ``"producer config"``). Raises InvalidConfigError for
    a ``given`` that is not a mapping, an unknown key or a value out of range.
    """
    if given is not None and not isinstance(given, Mapping):
        raise InvalidConfigError(f"{what} must be a mapping of key to value, got {type(given).__name__}")
    result = {name: key.default for name, key in keys.items()} if with_defaults else {}
    for raw_name, raw_value in (given or {}).items():
        name = raw_name if raw_name in keys else normalize_name(raw_name)
        key = keys.get(name)
        if key is None:
            known = ", ".join(sorted(keys))
            raise InvalidConfigError(f"unknown {what} key {raw_name!r}; known keys: {known}")
        result[name] = key.parse(raw_value)
    return result
