"""Every validation failure is a ``Problem``: a field path and what is wrong there."""

from __future__ import annotations

import pytest

from deuz_django.core import InvalidInputError, Problem
from deuz_django.core.approvals import ToolApprovalResponse


def test_an_invalid_input_error_carries_the_problem_it_names() -> None:
    with pytest.raises(InvalidInputError) as refused:
        ToolApprovalResponse.from_json(
            {"approvalId": "a", "approved": "yes"}, path="r[2]"
        )
    assert refused.value.problem == Problem(("r", 2, "approved"), "expected a boolean")
    assert refused.value.problem.field == "r[2].approved"
    assert str(refused.value.problem) == str(refused.value)


@pytest.mark.parametrize(
    "text",
    ["pass exactly one of messages or prompt", "The webhook secret holds no bytes."],
)
def test_a_refusal_about_the_whole_input_has_no_path(text: str) -> None:
    assert InvalidInputError(text).problem == Problem((), text)


def test_only_the_leading_path_is_read_from_the_text() -> None:
    problem = InvalidInputError("checkpoint: not valid JSON (line 1: x)").problem
    assert problem == Problem(("checkpoint",), "not valid JSON (line 1: x)")
