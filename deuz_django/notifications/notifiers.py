"""Notifiers: the ways people and other systems hear about runs and approvals.

``DEUZ["NOTIFIERS"]`` lists them. Each entry names its class (``BACKEND``) and gives its
options in capitals; :func:`load_notifier` passes them as keyword arguments::

    "NOTIFIERS": [
        {"BACKEND": "deuz_django.notifications.emails.EmailNotifier"},
        {"BACKEND": "deuz_django.notifications.webhooks.WebhookNotifier",
         "URL": "https://hooks.example.com/deuz", "SECRET": env("DEUZ_WEBHOOK_SECRET"),
         "EVENTS": ["approval.requested", "run.failed"]},
    ]

A notifier turns an :class:`Event` into rows of the delivery log (:meth:`Notifier.
deliveries`, while the event is fresh) and later sends one row (:meth:`Notifier.send`, in
a task, as often as it takes). :mod:`deuz_django.notifications` does the rest: when,
where, and how often.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import import_string

from ..conf import deuz_settings
from ..models.deliveries import QUEUED_GRACE, Delivery

if TYPE_CHECKING:
    from ..models import Approval, Run

# Every event, in the words of the signal that announces it (deuz_django.signals).
EVENTS = (
    "approval.requested",
    "question.asked",
    "approval.decided",
    "approval.reminder",
    "approval.escalated",
    "run.suspended",
    "run.completed",
    "run.failed",
    "run.stopped",
)
DEFAULT_MAX_ATTEMPTS = 8
MAX_ATTEMPTS_LIMIT = 30  # about five days of backoff
CONFIG_ERROR = "deuz_django.E021"


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened, as a signal reported it once it was committed."""

    type: str  # one of EVENTS
    run: Run
    approval: Approval | None = None
    approvals: tuple[Approval, ...] = ()  # run.suspended: what the run waits on
    error: str = ""  # run.failed
    to: str = ""  # approval.escalated: "perm:<app_label.codename>" or "group:<name>"
    created_at: datetime = field(default_factory=timezone.now)


class DeliveryFailed(Exception):
    """One attempt to send a delivery failed (``status_code``: the HTTP answer, if any)."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class NotifierConfigError(ImproperlyConfigured):
    """A ``DEUZ["NOTIFIERS"]`` entry that cannot work; ``check_id`` is the system
    check that reports it."""

    def __init__(self, message: str, *, check_id: str = CONFIG_ERROR) -> None:
        super().__init__(message)
        self.check_id = check_id


class Notifier(ABC):
    """A way to notify: the base of every ``BACKEND``.

    ``events`` are the :data:`EVENTS` it acts on (all it supports by default);
    ``max_attempts`` how often a delivery is tried before it is marked failed.
    """

    channel: ClassVar[str]
    supported_events: ClassVar[tuple[str, ...]] = EVENTS
    # Whether its deliveries link to the approval pages (then DEUZ["SITE_URL"] is needed).
    makes_links: ClassVar[bool] = False
    # Seconds one attempt may take: the next is never started before it timed out.
    timeout: float = 0

    def __init__(
        self,
        *,
        events: Sequence[str] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if events is None:
            events = self.supported_events
        if isinstance(events, str) or not isinstance(events, Sequence):
            raise NotifierConfigError("EVENTS must be a list of event names.")
        unknown = [e for e in events if e not in self.supported_events]
        if unknown:
            raise NotifierConfigError(
                f"EVENTS: {', '.join(map(repr, unknown))} cannot be sent by "
                f"{type(self).__name__} (it sends {', '.join(self.supported_events)})."
            )
        if (
            not isinstance(max_attempts, int)
            or isinstance(max_attempts, bool)
            or not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise NotifierConfigError(
                f"MAX_ATTEMPTS must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT}."
            )
        self.events = frozenset(events)
        self.max_attempts = max_attempts

    def wants(self, event: Event) -> bool:
        return event.type in self.events

    def delivery(self, event: Event, target: str, body: str, **fields: Any) -> Delivery:
        """An unsaved row of the delivery log for ``event``, its first attempt queued."""
        return Delivery(
            channel=self.channel,
            event=event.type,
            run=event.run,
            target=target,
            body=body,
            max_attempts=self.max_attempts,
            next_attempt_at=timezone.now() + QUEUED_GRACE,
            **fields,
        )

    def sends(self, delivery: Delivery) -> bool:
        """Whether this notifier is the one to send ``delivery`` (on a retry, the row's
        notifier is found again among those configured then)."""
        return delivery.channel == self.channel

    # -- what a notifier implements --------------------------------------------------------

    @abstractmethod
    def deliveries(self, event: Event) -> list[Delivery]:
        """The unsaved rows ``event`` makes (:meth:`delivery`); nothing is sent here.
        Runs where the event happened (often a leg), once it committed: keep it cheap,
        and leave slow work to :meth:`send`."""

    @abstractmethod
    def send(self, delivery: Delivery) -> int | None:
        """Send one row once, in a task; raise :class:`DeliveryFailed` when it did not
        arrive. Returns the HTTP status the receiver answered, when there is one."""


def entries() -> list[Any]:
    notifiers = deuz_settings.NOTIFIERS
    if not isinstance(notifiers, list | tuple):
        raise NotifierConfigError(
            "DEUZ['NOTIFIERS'] must be a list of notifier entries.",
            check_id="deuz_django.E020",
        )
    return list(notifiers)


def load_notifier(index: int, entry: Any) -> Notifier:
    """Build entry ``index`` of ``DEUZ["NOTIFIERS"]``; raises :class:`NotifierConfigError`
    naming the entry and the option that is wrong."""
    where = f"DEUZ['NOTIFIERS'][{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("BACKEND"), str):
        raise NotifierConfigError(
            f"{where} must be a dict with a BACKEND (the notifier's dotted path).",
            check_id="deuz_django.E020",
        )
    path = entry["BACKEND"]
    try:
        cls = import_string(path)
    except ImportError as error:
        raise NotifierConfigError(
            f"{where}: BACKEND {path!r} cannot be imported: {error}",
            check_id="deuz_django.E020",
        ) from error
    if not (isinstance(cls, type) and issubclass(cls, Notifier)):
        raise NotifierConfigError(
            f"{where}: BACKEND {path!r} is not a Notifier class.",
            check_id="deuz_django.E020",
        )
    if inspect.isabstract(cls):
        raise NotifierConfigError(
            f"{where}: BACKEND {path!r} does not implement "
            f"{', '.join(sorted(cls.__abstractmethods__))}.",
            check_id="deuz_django.E020",
        )
    parameters = {
        name.upper(): parameter
        for name, parameter in inspect.signature(cls).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    options = {key: value for key, value in entry.items() if key != "BACKEND"}
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        raise NotifierConfigError(
            f"{where}: unknown option {', '.join(map(repr, unknown))} "
            f"(options of {cls.__name__}: {', '.join(sorted(parameters))})."
        )
    missing = [
        name
        for name, parameter in parameters.items()
        if parameter.default is inspect.Parameter.empty and name not in options
    ]
    if missing:
        raise NotifierConfigError(
            f"{where}: {cls.__name__} needs {', '.join(missing)}."
        )
    try:
        return cls(**{key.lower(): value for key, value in options.items()})
    except NotifierConfigError as error:
        raise NotifierConfigError(
            f"{where}: {error}", check_id=error.check_id
        ) from None
