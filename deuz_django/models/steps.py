"""The step journal's rows: what a step did between two checkpoints — its model turn,
and each tool call's start (on the decision that authorized it) and outcome."""

from __future__ import annotations

from django.db import models

from .runs import Run


class RunStep(models.Model):
    """One step's model turn in the step journal, recorded before any of its tools ran.

    ``basis`` is how many messages the history held when the model was called; ``message``
    the codec JSON of the assistant message with its tool calls.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="journal_steps")
    step_index = models.PositiveIntegerField()
    basis = models.PositiveIntegerField()
    message = models.TextField()

    class Meta:
        ordering = ["run", "step_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "step_index"], name="deuz_journal_step"
            )
        ]

    def __str__(self) -> str:
        return f"{self.run_id} step {self.step_index}"


class RunCall(models.Model):
    """One tool call of a journaled step — an execution: the row exists once the call
    started; it is ``finished`` once its outcome (``result``, codec JSON, and
    ``is_error``) is recorded. A call that ran on a recorded decision points at it
    (``decision``, its receipt): one decision, one execution, by the unique key."""

    step = models.ForeignKey(RunStep, on_delete=models.CASCADE, related_name="calls")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=200, blank=True)
    finished = models.BooleanField(default=False)
    result = models.TextField(blank=True)
    is_error = models.BooleanField(default=False)
    decision = models.OneToOneField(
        "Approval",
        null=True,
        blank=True,
        on_delete=models.RESTRICT,
        related_name="execution",
    )
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["step", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["step", "tool_call_id"], name="deuz_journal_call"
            )
        ]

    def __str__(self) -> str:
        state = "finished" if self.finished else "started"
        return f"{self.tool_call_id} ({state})"
