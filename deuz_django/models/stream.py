"""The stream journal's rows: a run's UI parts at their gapless ``seq``."""

from __future__ import annotations

from django.db import models

from .runs import Run


class StreamJournalEntry(models.Model):
    """One UI part of a run's stream, at its gapless per-run ``seq`` (or the leg-end sentinel)."""

    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="journal_entries"
    )
    seq = models.PositiveIntegerField()
    part = models.TextField()  # JSON of the UI part; {"type":"done"} ends a leg

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="deuz_stream_seq")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq}"
