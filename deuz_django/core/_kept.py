"""The JSON object a value was read from, kept so that writing it back changes no byte.

Deuz's JSON forms are open (SPEC R8.6, ``docs/interop.md``): the reference passes keys it
does not know, ``null`` optionals, empty lists and absent keys through untouched, in the
order it read them. A record read with ``from_json`` (a message, a part, a usage, an
approval request, a checkpoint) therefore keeps its source object, and ``to_json`` writes
that object back, each nested record rendered by its own value. A record built in Python,
or derived with ``dataclasses.replace``, has no source and writes the canonical form.

Each record declares the source as ``_json = field(default=None, init=False, repr=False,
compare=False)``: it is not part of the value, so records that differ only in it compare
equal.
"""

from __future__ import annotations

from typing import Any


def keep[T](value: T, source: dict[str, Any]) -> T:
    """``value`` (a frozen record just built from ``source``) remembering ``source``."""
    object.__setattr__(value, "_json", source)
    return value
