"""Which A2A context a run belongs to (:mod:`deuz_django.protocols.a2a`): a
conversation of several tasks, each a run. A run started elsewhere has no row; its
context is itself."""

from __future__ import annotations

from django.db import models

from .runs import Run


class TaskContext(models.Model):
    """One run's context id: the caller's, or the run id of the context's first task."""

    run = models.OneToOneField(
        Run, primary_key=True, on_delete=models.CASCADE, related_name="task_context"
    )
    context_id = models.CharField(max_length=200, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.run_id} in {self.context_id}"
