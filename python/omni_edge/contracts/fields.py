"""Strict reading of JSON objects: wrong types, unknown fields and out-of-range values are refused
with a message that names the field. Mirrors controller_cpp/base/json_fields.h."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from omni_edge.contracts.errors import ContractError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_DEPTH = 128  # of JSON nesting, as controller_cpp/base/json_fields.cc's ParseJson


def nesting_within(text: str, max_depth: int = MAX_DEPTH) -> bool:
    """The depth of brackets outside strings: refused before a parser is asked to build it."""
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > max_depth:
                return False
        elif c in "]}":
            depth -= 1
    return True


def check_text(value: Any, where: str, depth: int = 0) -> None:
    """What the native parser refuses in parsed JSON: nesting deeper than MAX_DEPTH, and strings
    (keys too) that are not valid UTF-8 (a lone surrogate such as "\\ud800")."""
    if depth > MAX_DEPTH:
        raise ContractError("invalid_json", f"{where}: nesting deeper than {MAX_DEPTH}")
    items: list[Any] = []
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, Mapping):
        items = list(value.keys())
        for v in value.values():
            check_text(v, where, depth + 1)
    elif isinstance(value, list):
        for v in value:
            check_text(v, where, depth + 1)
    for text in items:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ContractError("invalid_json", f"{where}: invalid UTF-8 in a string") from None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


class FieldReader:
    """Reads the fields of one JSON object; `done()` refuses any field that was not read."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise ContractError("invalid_field", f"{where}: expected an object, got {_type_name(data)}")
        self._data = data
        self._where = where
        self._seen: set[str] = set()

    def _path(self, name: str) -> str:
        return f"{self._where}.{name}"

    def _take(self, name: str, required: bool) -> Any:
        self._seen.add(name)
        if name not in self._data:
            if required:
                raise ContractError("invalid_field", f"{self._path(name)}: required field is missing")
            return None
        return self._data[name]

    def has(self, name: str) -> bool:
        return name in self._data and self._data[name] is not None

    def string(self, name: str, *, required: bool = True, non_empty: bool = True, default: str = "") -> str:
        value = self._take(name, required)
        if value is None and not required:
            return default
        if not isinstance(value, str):
            raise ContractError("invalid_field", f"{self._path(name)}: expected a string, got {_type_name(value)}")
        if non_empty and not value:
            raise ContractError("invalid_field", f"{self._path(name)}: must be a non-empty string")
        return value

    def optional_string(self, name: str) -> str | None:
        value = self._take(name, False)
        if value is None:
            return None
        if not isinstance(value, str):
            raise ContractError("invalid_field", f"{self._path(name)}: expected a string, got {_type_name(value)}")
        return value

    def integer(self, name: str, *, required: bool = True, minimum: int | None = None, default: int = 0) -> int:
        value = self._take(name, required)
        if value is None and not required:
            return default
        return check_int(value, self._path(name), minimum)

    def boolean(self, name: str, *, required: bool = True, default: bool = False) -> bool:
        value = self._take(name, required)
        if value is None and not required:
            return default
        if not isinstance(value, bool):
            raise ContractError("invalid_field", f"{self._path(name)}: expected a boolean, got {_type_name(value)}")
        return value

    def number(self, name: str) -> float:
        value = self._take(name, True)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ContractError("invalid_field", f"{self._path(name)}: expected a number, got {_type_name(value)}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise ContractError("invalid_field", f"{self._path(name)}: must be finite")
        return number

    def array(self, name: str, *, required: bool = True) -> list[Any]:
        value = self._take(name, required)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise ContractError("invalid_field", f"{self._path(name)}: expected an array, got {_type_name(value)}")
        return value

    def obj(self, name: str, *, required: bool = True) -> Mapping[str, Any] | None:
        value = self._take(name, required)
        if value is None and not required:
            return None
        if not isinstance(value, Mapping):
            raise ContractError("invalid_field", f"{self._path(name)}: expected an object, got {_type_name(value)}")
        return value

    def path(self, name: str) -> str:
        return self._path(name)

    def done(self) -> None:
        unknown = sorted(set(self._data) - self._seen)
        if unknown:
            raise ContractError("invalid_field", f"{self._path(unknown[0])}: unknown field")


def check_int(value: Any, path: str, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContractError("invalid_field", f"{path}: expected an integer, got {_type_name(value)}")
    if value < INT64_MIN or value > INT64_MAX:
        raise ContractError("invalid_field", f"{path}: integer out of 64-bit range")
    if minimum is not None and value < minimum:
        raise ContractError("invalid_field", f"{path}: must be >= {minimum}, got {value}")
    return value
