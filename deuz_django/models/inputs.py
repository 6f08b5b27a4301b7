"""What people said to a run while it ran or waited (steering): one row an input, in the
order the run accepted them, marked delivered by the checkpoint that first held it
(:mod:`deuz_django.storage.inputs`, :mod:`deuz_django.core.durable.inputs`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .runs import Run


class RunInput(models.Model):
    """One input: its place in the run's queue (``seq``, from 1; the run's
    ``input_seq`` is the last one taken), the id a client chose (or one made up) so a
    retry is recognised, its text, who sent it — a user, or an operator from a shell —
    and, once delivered, the step whose model call first saw it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="inputs")
    seq = models.PositiveIntegerField()
    input_id = models.CharField(max_length=100)
    text = models.TextField()
    accepted_at = models.DateTimeField(default=timezone.now)
    sent_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="deuz_run_inputs",
    )
    operator = models.CharField(max_length=150, blank=True)
    delivered_at_step = models.PositiveIntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "seq"]
        verbose_name = _("run input")
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="deuz_input_position"),
            models.UniqueConstraint(fields=["run", "input_id"], name="deuz_input_id"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq}"

    @property
    def sender(self) -> str:
        """Who sent it: a user, or an operator from a shell."""
        if self.operator:
            return _("%(name)s (operator)") % {"name": self.operator}
        if self.sent_by is not None:
            return str(self.sent_by.get_username())
        return ""
