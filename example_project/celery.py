"""The demo project's Celery app (``DEUZ_TASKS=celery``): ``celery -A example_project
worker`` runs the legs that django-tasks-celery queues, configured by the ``CELERY_*``
settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project")
app.config_from_object("django.conf:settings", namespace="CELERY")
