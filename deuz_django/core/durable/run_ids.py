"""The run ids of sub-agents: a child run id names its parent run, agent and call (R9.3).

A durable sub-agent checkpoints under its own run id, built from the parent's::

    >>> child_run_id("run-42", "coder", "toolu_1")
    'run-42::coder#toolu_1'
    >>> child_run_id("run-42::coder#toolu_1", "tester", "toolu_7")
    'run-42::coder#toolu_1::tester#toolu_7'
    >>> parent_run_id("run-42::coder#toolu_1::tester#toolu_7")
    'run-42::coder#toolu_1'
    >>> root_run_id("run-42::coder#toolu_1::tester#toolu_7")
    'run-42'

The format is the reference's, so a store shared with the TypeScript runtime finds the
same keys. A root run id must not contain ``::``.
"""

from __future__ import annotations

_SEPARATOR = "::"


def child_run_id(parent_run_id: str, agent_name: str, tool_call_id: str) -> str:
    """The run id of the sub-agent that call ``tool_call_id`` of ``parent_run_id`` runs."""
    return f"{parent_run_id}{_SEPARATOR}{agent_name}#{tool_call_id}"


def is_child_run_id(run_id: str) -> bool:
    """Whether ``run_id`` is a sub-agent's."""
    return _SEPARATOR in run_id


def parent_run_id(run_id: str) -> str | None:
    """The run id of the run whose call started this sub-agent; ``None`` for a root run."""
    if not is_child_run_id(run_id):
        return None
    return run_id.rsplit(_SEPARATOR, 1)[0]


def root_run_id(run_id: str) -> str:
    """The run at the top of the tree ``run_id`` belongs to (itself for a root run)."""
    return run_id.split(_SEPARATOR, 1)[0]


def child_run_id_prefix(run_id: str) -> str:
    """What the run ids of every sub-agent below ``run_id`` start with (prefix queries)."""
    return run_id + _SEPARATOR
