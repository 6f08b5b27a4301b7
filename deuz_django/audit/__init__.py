"""The audit trail that proves itself: every decision, edit, answer, grant, rule change,
stop, fork, replay, input and recovery appended to a hash chain per tenant in the
transaction of the act it records (:mod:`.chain`), verified record by record
(:mod:`.verify`) and exported for an auditor with its digests (:mod:`.export`).

The services that act call :func:`append`; ``deuz audit verify`` and ``deuz audit
export`` are the command's side, the run page's timeline the admin's.
"""

from .chain import append, held_to_the_end
from .verify import ChainReport, verify_chain

__all__ = ["ChainReport", "append", "held_to_the_end", "verify_chain"]
