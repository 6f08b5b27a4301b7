"""Sync tools next to Django's ORM.

The core runs a sync tool in a worker thread. Django opens a database connection per
thread and closes it only at the end of a request, so a tool that used the ORM there would
leave its connection open for good (PostgreSQL then refuses to drop or fills up). Legs the
app runs use :func:`run_blocking`, which closes that thread's connections after each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django.db import connections

from ..core import Deps


async def run_blocking(function: Callable[..., Any], *args: Any) -> Any:
    def call() -> Any:
        try:
            return function(*args)
        finally:
            connections.close_all()

    return await asyncio.to_thread(call)


def with_django_threads(deps: Deps) -> Deps:
    """``deps`` whose sync tools close their database connections (unless it chose its own
    way of running them)."""
    if deps.run_blocking is asyncio.to_thread:
        return replace(deps, run_blocking=run_blocking)
    return deps
