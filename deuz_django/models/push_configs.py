"""Where an A2A caller wants a task's status changes POSTed (A2A push notification
configs, :mod:`deuz_django.protocols.a2a.push`): one row a config of a run."""

from __future__ import annotations

from django.db import models

from .runs import Run


class PushConfig(models.Model):
    """One config: its id (the caller's, or one made up), the URL, and the token the
    caller asked to get back in ``X-A2A-Notification-Token``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="push_configs")
    config_id = models.CharField(max_length=100)
    url = models.URLField(max_length=2000)
    token = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "config_id"], name="deuz_push_config_unique_id"
            )
        ]

    def __str__(self) -> str:
        return f"{self.config_id} of {self.run_id} to {self.url}"
