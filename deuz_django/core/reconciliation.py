"""What a tool finds out about one of its calls that a crash left in doubt.

A call that started and left no outcome (the process died in between) is *in doubt*. A
tool that can check its own effects declares ``reconcile``: given the call's arguments
and context (``ctx.idempotency_key`` is the key the call ran under), it answers with a
:class:`Reconciliation`, and the loop asks it before it asks a person::

    def refunded(args: dict[str, Any], ctx: ToolContext) -> Reconciliation:
        refund = Refund.objects.filter(idempotency_key=ctx.idempotency_key).first()
        if refund is None:
            return Reconciliation.did_not_happen()  # the call runs, once
        return Reconciliation.happened(f"Refunded ${refund.amount}.")  # used as is

    @tool(reconcile=refunded)
    def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> str: ...

Answer :meth:`~Reconciliation.did_not_happen` only when the effect cannot still arrive
(pass the idempotency key to the service, so a late one is dropped), and
:meth:`~Reconciliation.cannot_tell` whenever unsure: the call then goes to a person, as
it does for a tool without ``reconcile``, or a ``reconcile`` that raises or runs past the
tool's ``timeout_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .exceptions import InvalidInputError

ReconciliationStatus = Literal["happened", "did-not-happen", "cannot-tell"]


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """A ``reconcile``'s answer; build it with one of the three class methods.

    ``result`` and ``is_error`` are the call's outcome, and only "happened" has one.
    """

    status: ReconciliationStatus
    result: Any = None
    is_error: bool = False

    def __post_init__(self) -> None:
        if self.status not in ("happened", "did-not-happen", "cannot-tell"):
            raise InvalidInputError(f"reconciliation.status: {self.status!r}")
        if self.status != "happened" and (self.result is not None or self.is_error):
            raise InvalidInputError(
                f"reconciliation: only 'happened' has a result, not {self.status!r}"
            )

    @classmethod
    def happened(cls, result: Any, *, is_error: bool = False) -> Reconciliation:
        """The call's effect took place, and this is its result: it is recorded as the
        call's outcome and the tool does not run."""
        return cls("happened", result, is_error)

    @classmethod
    def did_not_happen(cls) -> Reconciliation:
        """The call had no effect: it runs now, as the one execution it was allowed."""
        return cls("did-not-happen")

    @classmethod
    def cannot_tell(cls) -> Reconciliation:
        """The tool cannot find out: a person decides (the run suspends on the call)."""
        return cls("cannot-tell")
