"""``GET tasks``: the caller's tasks of one agent, newest first, a page at a time,
filtered by context and state as A2A's ``ListTasksRequest`` says."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from asgiref.sync import async_to_sync
from django.db.models import Q
from django.http import QueryDict

from ...models import Run, RunStatus
from ...models.visibility import Person
from .following import journal_so_far
from .tasks import task

_BY_PERSON = Q(stopped_by__isnull=False) | ~Q(stop_operator="")
STATE_FILTERS: dict[str, Q] = {
    "TASK_STATE_SUBMITTED": Q(status=RunStatus.RUNNING, legs=0),
    "TASK_STATE_WORKING": Q(status=RunStatus.RUNNING, legs__gt=0),
    "TASK_STATE_INPUT_REQUIRED": Q(status=RunStatus.SUSPENDED),
    "TASK_STATE_COMPLETED": Q(status=RunStatus.COMPLETED),
    "TASK_STATE_CANCELED": Q(status=RunStatus.STOPPED) & _BY_PERSON,
    "TASK_STATE_REJECTED": Q(status=RunStatus.STOPPED) & ~_BY_PERSON,
}


def _count(query: QueryDict, name: str, default: int | None) -> int | None:
    value = query.get(name)
    if value is None:
        return default
    if not value.isdigit():
        raise InvalidParamsError(f"{name}: expected a whole number, got {value!r}.")
    return int(value)


def _moment(query: QueryDict, name: str) -> datetime | None:
    value = query.get(name)
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise InvalidParamsError(
            f"{name}: an RFC 3339 timestamp with its offset, not {value!r}."
        )
    return moment


def read_query(query: QueryDict) -> dict[str, Any]:
    state = query.get("status", "")
    if state and state not in STATE_FILTERS:
        raise InvalidParamsError(
            f"status: one of {', '.join(STATE_FILTERS)}, not {state!r}."
        )
    size = _count(query, "pageSize", DEFAULT_LIST_TASKS_PAGE_SIZE)
    if size is None or not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
        raise InvalidParamsError(
            f"pageSize: between 1 and {MAX_LIST_TASKS_PAGE_SIZE}, not {size}."
        )
    token = query.get("pageToken", "")
    if token and not token.isdigit():
        raise InvalidParamsError("pageToken: not a token this server gave.")
    return {
        "context_id": query.get("contextId", ""),
        "state": state,
        "page_size": size,
        "after": int(token) if token else None,
        "history_length": _count(query, "historyLength", 0),
        "artifacts": query.get("includeArtifacts", "") == "true",
        "updated_after": _moment(query, "statusTimestampAfter"),
    }


def tasks(user: Person, agent: str, query: dict[str, Any]) -> a2a.ListTasksResponse:
    runs = (
        Run.objects.for_user(user)
        .filter(agent=agent, parent__isnull=True)
        .select_related("task_context")
    )
    if query["context_id"]:
        context = query["context_id"]
        runs = runs.filter(
            Q(task_context__context_id=context)
            | Q(run_id=context, task_context__isnull=True)
        )
    if query["state"]:
        runs = runs.filter(STATE_FILTERS[query["state"]])
    if query["updated_after"] is not None:
        runs = runs.filter(updated_at__gte=query["updated_after"])
    total = runs.count()
    if query["after"] is not None:
        runs = runs.filter(pk__lt=query["after"])
    page = list(runs.order_by("-pk")[: query["page_size"] + 1])
    more = len(page) > query["page_size"]
    page = page[: query["page_size"]]
    found = [
        task(
            run,
            async_to_sync(journal_so_far)(run.run_id)[1] if query["artifacts"] else [],
            history_length=query["history_length"],
            with_artifacts=query["artifacts"],
        )
        for run in page
    ]
    return a2a.ListTasksResponse(
        tasks=found,
        next_page_token=str(page[-1].pk) if more else "",
        page_size=query["page_size"],
        total_size=total,
    )
