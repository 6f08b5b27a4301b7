"""Signals for integrations: what happened to a run or an approval, once it is durable.

Every signal is sent *after* the transaction that made it true commits (a rolled-back
suspension asks nobody), with :meth:`~django.dispatch.Signal.send_robust`: a receiver
that raises is logged (``django.dispatch``) and never breaks the leg, the verdict or the
request that sent it. Receivers run in the process and thread that committed — often a
leg's — so anything slow (mail, HTTP) belongs in a task (``django.tasks``).

=========================  ====================================================  ==========
signal                     sent when                                             arguments
=========================  ====================================================  ==========
``approval_requested``     a call waits for a person: a gated call, or a call    approval
                           a crash left in doubt (``approval.kind``)
``question_asked``         a question waits for its answer                       approval
``approval_decided``       a verdict was recorded: by a person, an operator, a   approval
                           rule, an expiry, or a resume that denied the rest
``approval_reminder``      a pending approval's reminder is due                  approval
``approval_escalated``     a pending approval passed its deadline and went to    approval,
                           more people (``to``: a permission or group name)      to
``run_suspended``          a leg ended with the run waiting for people           run, approvals
``run_completed``          a leg ended with the run completed                    run
``run_failed``             a leg failed, or recovery gave up on the run          run, error
``run_stopped``            the run stopped: a person stopped it, or a run-wide   run
                           limit or a loop did (``run.stop_reason``)
=========================  ====================================================  ==========

``sender`` is the model class (``Approval`` or ``Run``); ``approval`` and ``run`` are
rows as committed, ``approvals`` the run's pending approval rows; an escalation's ``to``
is ``"perm:<app_label.codename>"`` or ``"group:<name>"``: the people it now goes to too
(who still need the right to decide the call).

>>> from django.dispatch import receiver
>>> @receiver(approval_requested)
... def page_on_call(sender, approval, **kwargs):
...     enqueue_page.enqueue(approval.pk)
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import Signal

approval_requested = Signal()
question_asked = Signal()
approval_decided = Signal()
approval_reminder = Signal()
approval_escalated = Signal()
run_suspended = Signal()
run_completed = Signal()
run_failed = Signal()
run_stopped = Signal()


def send_on_commit(signal: Signal, sender: type, **kwargs: Any) -> None:
    """Send ``signal`` once the current transaction commits (at once outside one);
    a receiver that raises is logged by Django (``django.dispatch``), never raised."""
    transaction.on_commit(lambda: signal.send_robust(sender, **kwargs))
