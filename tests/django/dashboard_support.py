"""Rows for the dashboard tests, written straight to the tables with chosen times.

``run`` and ``approval`` create one row each, ``created``/``decided`` moments set after the
insert (``auto_now_add`` would overwrite them). ``seed_demo`` fills a site with a month of
plausible activity for the browser test and the dashboard's screenshot (docs/dashboard.md).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from deuz_django.models import Approval, ApprovalStatus, Run


def usage(input_tokens: int, output_tokens: int, **more: int) -> dict[str, int]:
    keys = {"cached_read": "cachedReadTokens", "cache_write": "cacheWriteTokens"}
    out = {
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens + sum(more.values()),
    }
    out.update({keys[name]: value for name, value in more.items()})
    return out


def run(
    run_id: str,
    *,
    agent: str = "support",
    status: str = "completed",
    created: datetime | None = None,
    tokens: dict[str, int] | None = None,
    error: str = "",
    owner: Any = None,
    parent: Run | None = None,
) -> Run:
    row = Run.objects.create(
        run_id=run_id,
        agent=agent,
        status=status,
        usage=tokens or {},
        last_error=error,
        owner=owner,
        parent=parent,
    )
    if created is not None:
        Run.objects.filter(pk=row.pk).update(created_at=created)
        row.refresh_from_db()
    return row


def approval(
    of: Run,
    approval_id: str,
    *,
    tool: str = "send_email",
    created: datetime,
    decided_after: timedelta | None = None,
    status: str = ApprovalStatus.APPROVED,
) -> Approval:
    """A pending approval when ``decided_after`` is None, else one decided that long after."""
    decided = decided_after is not None
    row = Approval.objects.create(
        run=of,
        approval_id=approval_id,
        tool_call_id=approval_id,
        tool_name=tool,
        status=status if decided else ApprovalStatus.PENDING,
        decided_at=created + decided_after if decided_after is not None else None,
    )
    Approval.objects.filter(pk=row.pk).update(created_at=created)
    row.refresh_from_db()
    return row


def seed_demo(days: int = 30, seed: int = 7) -> None:
    """A month of runs of three agents, some failed, with approvals decided and waiting."""
    rng = random.Random(seed)
    now = timezone.now()
    tools = ("send_email", "issue_refund", "files__delete_file")
    for day in range(days):
        for n in range(rng.randint(3, 9) + (days - day) // 6):
            agent = rng.choice(("support", "support", "research", "assistant"))
            created = now - timedelta(days=day, minutes=rng.randint(0, 600))
            status = rng.choices(
                ("completed", "suspended", "running"),
                weights=(8, 2, 1) if day else (3, 3, 2),
            )[0]
            made = run(
                f"run-{day}-{n}",
                agent=agent,
                status=status,
                created=created,
                tokens=usage(rng.randint(800, 9000), rng.randint(100, 2500)),
                error="ModelTimeoutError: openai: request timed out"
                if rng.random() < 0.06
                else "",
            )
            if rng.random() < 0.5:
                tool = rng.choice(tools)
                waits = status == "suspended"
                approval(
                    made,
                    f"a-{day}-{n}",
                    tool=tool,
                    created=created,
                    decided_after=None
                    if waits
                    else timedelta(
                        seconds=rng.randint(20, 900 * (1 + tools.index(tool)))
                    ),
                    status=rng.choice(
                        (ApprovalStatus.APPROVED,) * 4 + (ApprovalStatus.DENIED,)
                    ),
                )
