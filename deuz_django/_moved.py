"""The modules of the flat layout (0.1), importable under their old names.

Dotted paths are a public contract: ``STREAM_JOURNAL`` (0.1: ``STREAM_STORE``) and
notifier ``BACKEND`` strings in settings, ``django.tasks`` task paths stored in queues
(a task queued before a deploy runs after it), and imports in users' code
(``deuz_django.webhooks.verify_signature``). Importing an old name gives the module
it moved to — the same module object, so
``deuz_django.journal.DatabaseJournal is deuz_django.storage.stream_journal.DatabaseJournal``.
New code uses the new names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED = {
    "action_links": "approvals.links",
    "action_views": "approvals.link_views",
    "automatic": "rules.automatic",
    "blocking": "runs.threads",
    "boundary_write": "storage.writes",
    "claims": "runs.claims",
    "conditions": "rules.conditions",
    "connections": "storage.db",
    "consumers": "streaming.consumers",
    "continuation": "runs.continuing",
    "deadline_rows": "deadlines.rows",
    "deadline_sweep": "deadlines.sweep",
    "deliveries": "models.deliveries",
    "deadlines": "deadlines",
    "draining": "runs.draining",
    "emails": "notifications.emails",
    "following": "streaming.following",
    "frames": "streaming.frames",
    "grants": "rules.grants",
    "journal": "storage.stream_journal",
    "leases": "storage.leases",
    "legs": "runs.legs",
    "live": "streaming.live",
    "notifications": "notifications",
    "notifiers": "notifications.notifiers",
    "questions": "approvals.questions",
    "recipients": "notifications.recipients",
    "recovery": "runs.recovery",
    "responses": "approvals.settling",
    "run_limits": "runs.limits",
    "sse": "streaming.sse",
    "standing": "models.rules",
    "step_journal": "storage.step_journal",
    "stopping": "runs.stopping",
    "store": "storage.store",
    "suspensions": "approvals.asking",
    "tasks": "runs.tasks",
    "tool_versions": "approvals.tool_versions",
    "transcript": "runs.transcript",
    "verdicts": "approvals.verdicts",
    "webhooks": "notifications.webhooks",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``deuz_django.<old name>`` and loads the module it moved to."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        if package != "deuz_django" or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(
            f"deuz_django.{MOVED[spec.name.partition('.')[2]]}"
        )

    def exec_module(self, module: ModuleType) -> None:
        """The module it moved to ran already."""


def install() -> None:
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
