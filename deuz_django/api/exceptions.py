"""The REST API's errors, and the handler that turns every error into the same JSON shape.

Every error body is ``{"detail": str, "code": str}``, plus ``"errors"`` — a list of
``{"field", "message"}`` items, with ``"index"`` and ``"approvalId"`` when an item is about
one verdict of a batch — whenever the problem is about particular input. The hierarchy::

    APIException (DRF)
    ├── InvalidRequest       400  the body or a query parameter is not what the API takes
    │   └── InvalidVerdicts  400  a verdict of the batch is unknown, repeated or its token fails
    ├── VerdictsForbidden    403  the user may not decide an approval of the batch
    ├── Conflict             409  the run is busy, completed, stopped, undecided, not
    │                             finished (a replay), or a verdict is late; input
    │                             refused (``input_rejected``, ``run_not_steerable``)
    └── PayloadTooLarge      413  the body exceeds ``DATA_UPLOAD_MAX_MEMORY_SIZE``

Service errors (:mod:`deuz_django.exceptions`) map onto these in :func:`exception_handler`;
token values are never part of a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from ..core.exceptions import InvalidInputError, Problem
from ..exceptions import (
    ApprovalAlreadyDecided,
    ApprovalNotFound,
    InvalidVerdict,
    NotAReplay,
    NotPermitted,
    RunBusy,
    RunExists,
    RunNotFound,
    RunNotReplayable,
    RunNotResumable,
    RunNotSteerable,
    RunNotStoppable,
    UnknownAgent,
)

ErrorItem = dict[str, Any]


class DeuzAPIException(exceptions.APIException):
    """An API error that may list the particular inputs it is about."""

    def __init__(
        self,
        detail: str | None = None,
        code: str | None = None,
        errors: Sequence[ErrorItem] = (),
    ) -> None:
        super().__init__(detail, code)
        self.errors = list(errors)


class InvalidRequest(DeuzAPIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = _("The request is invalid.")
    default_code = "invalid"


class InvalidVerdicts(InvalidRequest):
    default_detail = _("A verdict of this request was refused; nothing was recorded.")
    default_code = "invalid_verdict"


class VerdictsForbidden(DeuzAPIException):
    status_code = status.HTTP_403_FORBIDDEN
    default_detail = _(
        "You may not decide an approval of this request; nothing was recorded."
    )
    default_code = "not_permitted"


class Conflict(DeuzAPIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = _("The run is not in a state that allows this.")
    default_code = "conflict"


class PayloadTooLarge(DeuzAPIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = _("The request body is too large.")
    default_code = "payload_too_large"


def too_large() -> PayloadTooLarge:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return PayloadTooLarge(
        f"The request body is larger than {limit} bytes.",
        errors=[{"field": "body", "message": f"larger than {limit} bytes"}],
    )


def field_problems(detail: Any, path: tuple[str | int, ...] = ()) -> list[Problem]:
    """DRF's nested validation detail as a flat list of problems.

    ``{"verdicts": {1: {"approved": ["..."]}}}`` → ``Problem(("verdicts", 1,
    "approved"), "...")``.
    """
    if isinstance(detail, Mapping):
        problems: list[Problem] = []
        for key, value in detail.items():
            step: tuple[str | int, ...] = () if key == "non_field_errors" else (key,)
            problems.extend(field_problems(value, path + step))
        return problems
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [Problem(path, str(message)) for message in detail]
        problems = []
        for index, value in enumerate(detail):
            if value:
                problems.extend(field_problems(value, (*path, index)))
        return problems
    return [Problem(path, str(detail))]


def error_item(problem: Problem) -> ErrorItem:
    """A problem as an item of an error body's ``errors``."""
    return {"field": problem.field or "body", "message": problem.message}


def invalid_input(error: InvalidInputError) -> InvalidRequest:
    """The core's refusal, naming the bad field (``messages[0].role: expected ...``)."""
    item = error_item(error.problem)
    return InvalidRequest(f"{item['field']}: {item['message']}", errors=[item])


def translate(exc: Exception) -> Exception:
    """A service error as the API exception it answers with (others pass through)."""
    if isinstance(exc, exceptions.ValidationError):
        errors = [error_item(p) for p in field_problems(exc.detail)]
        first = errors[0] if errors else {"field": "body", "message": "invalid"}
        return InvalidRequest(f"{first['field']}: {first['message']}", errors=errors)
    if isinstance(exc, exceptions.ParseError):
        return InvalidRequest(
            f"The request body is not valid JSON ({exc.detail}).",
            code="parse_error",
            errors=[{"field": "body", "message": str(exc.detail)}],
        )
    if isinstance(exc, RequestDataTooBig):
        return too_large()
    if isinstance(exc, RunNotFound):
        return exceptions.NotFound(str(exc))
    if isinstance(exc, NotAReplay):
        return exceptions.NotFound(str(exc), code=exc.code)
    if isinstance(
        exc,
        RunBusy
        | RunNotResumable
        | RunNotStoppable
        | RunNotReplayable
        | RunNotSteerable
        | RunExists
        | ApprovalAlreadyDecided,
    ):
        return Conflict(str(exc), code=exc.code)
    if isinstance(exc, UnknownAgent):
        return InvalidRequest(
            str(exc), code=exc.code, errors=[{"field": "agent", "message": str(exc)}]
        )
    if isinstance(exc, ApprovalNotFound | InvalidVerdict):
        return InvalidRequest(str(exc), code=exc.code)
    if isinstance(exc, InvalidInputError):
        return invalid_input(exc)
    if isinstance(exc, NotPermitted):
        return exceptions.PermissionDenied(str(exc), code=exc.code)
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with service errors mapped and every body in the one error shape."""
    exc = translate(exc)
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    response.data = error_body(exc)
    return response


def error_body(exc: exceptions.APIException) -> dict[str, Any]:
    """The one error shape of every answer the API gives: ``detail``, ``code`` and, when
    it names fields, ``errors`` (the SSE stream's refusals too)."""
    codes = exc.get_codes()
    body: dict[str, Any] = {
        "detail": str(exc.detail),
        "code": codes if isinstance(codes, str) else exc.default_code,
    }
    errors = getattr(exc, "errors", None)
    if errors:
        body["errors"] = errors
    return body


# -- the error body, as the schema documents it ------------------------------------------


class ErrorItemSerializer(serializers.Serializer[Any]):
    field = serializers.CharField(help_text="The input the problem is about.")
    message = serializers.CharField()
    index = serializers.IntegerField(
        required=False, help_text="The verdict's position."
    )
    approvalId = serializers.CharField(required=False)


class ErrorSerializer(serializers.Serializer[Any]):
    """Every error body."""

    detail = serializers.CharField()
    code = serializers.CharField()
    # DRF's metaclass moves declared fields off the class, so this does not shadow
    # Serializer.errors at runtime; the stubs cannot know that.
    errors = ErrorItemSerializer(many=True, required=False)  # type: ignore[assignment]
