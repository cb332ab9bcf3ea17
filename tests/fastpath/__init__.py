"""Argument generators for the fast-path differential tests, one module per toolkit pair.

Each module defines ``ARGUMENTS: dict[str, Callable[[random.Random, SessionTables], dict]]``:
for a tool name, a function drawing one keyword-argument dict, mixing the common well-typed
inputs (ids that exist, real names, valid enums and dates) with odd ones (wrong types, empty
strings, regex metacharacters, ids that do not exist), so both the fast path and its hand-off
to pandas are exercised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from random import Random
from typing import Any

ArgumentMaker = Callable[[Random, Any], dict[str, Any]]


def all_arguments() -> dict[str, ArgumentMaker]:
    """Every registered generator, by tool name."""
    out: dict[str, ArgumentMaker] = {}
    for name in ("directory_email", "calendar_analytics", "pm_crm"):
        try:
            module = importlib.import_module(f"tests.fastpath.{name}")
        except ModuleNotFoundError:
            continue
        out.update(module.ARGUMENTS)
    return out
