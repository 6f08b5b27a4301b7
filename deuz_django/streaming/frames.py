"""The WebSocket's client frames, read with the REST API's own serializers and JSON rules.

One input vocabulary: a ``start`` frame is what ``POST runs/`` takes, an
``approval-response`` is one verdict of ``POST runs/<id>/verdicts/``, a ``fork`` is
``POST runs/<id>/fork/``'s body, an ``input`` what ``POST runs/<id>/inputs/`` takes, and
every run id follows the API's rule. A frame the serializers refuse is a
:class:`FrameError` whose message names the field as the API's error items do; service
errors become the same codes and messages as over REST (:func:`service_error`).
"""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import exceptions, serializers

from ..api.derived_runs import ForkSerializer
from ..api.exceptions import DeuzAPIException, error_item, field_problems, translate
from ..api.inputs import SendInputSerializer
from ..api.parsers import loads
from ..api.serializers import (
    RunIdField,
    StartRunSerializer,
    StopSerializer,
    StrictIntegerField,
    VerdictSerializer,
)

MAX_FRAME_BYTES = 256 * 1024
logger = logging.getLogger("deuz_django")


class FrameError(Exception):
    """A client frame that cannot be acted on; answered with an ``error`` frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class RunFrame(serializers.Serializer[Any]):
    """``unsubscribe`` and ``cancel``: just the run."""

    runId = RunIdField()


class SubscribeFrame(RunFrame):
    lastSeq = StrictIntegerField(required=False, allow_null=True)


class ApprovalResponseFrame(VerdictSerializer):
    runId = RunIdField()


class StopFrame(StopSerializer):
    """``stop``: the run, and why (``POST runs/<id>/stop/``'s body)."""

    runId = RunIdField()


class ForkFrame(ForkSerializer):
    """``fork``: ``POST runs/<id>/fork/``'s body, the run to fork named as in every
    frame (``runId``) and the fork's own id, when the client chooses it, as
    ``forkRunId``."""

    runId = RunIdField()
    forkRunId = RunIdField(required=False)


class InputFrame(SendInputSerializer):
    """``input``: the run, and what to tell it (``POST runs/<id>/inputs/``'s body)."""

    runId = RunIdField()


FRAMES: dict[str, type[serializers.Serializer[Any]]] = {
    "start": StartRunSerializer,
    "subscribe": SubscribeFrame,
    "unsubscribe": RunFrame,
    "approval-response": ApprovalResponseFrame,
    "cancel": RunFrame,
    "stop": StopFrame,
    "fork": ForkFrame,
    "input": InputFrame,
}


def parse(text: str | None) -> dict[str, Any]:
    """The frame's JSON object, or a :class:`FrameError` saying what is wrong with it."""
    if text is None:
        raise FrameError("bad_frame", "frames must be JSON text, not binary")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
        raise FrameError("too_large", f"frames are limited to {MAX_FRAME_BYTES} bytes")
    try:
        frame = loads(text)
    except ValueError as error:
        raise FrameError("bad_json", f"not valid JSON: {error}") from None
    if not isinstance(frame, dict):
        raise FrameError("bad_frame", "a frame must be a JSON object")
    return frame


def validate(frame_type: str, frame: dict[str, Any]) -> dict[str, Any]:
    """The frame's fields, validated as the REST API validates the same input."""
    serializer = FRAMES[frame_type](
        data={key: value for key, value in frame.items() if key != "type"}
    )
    try:
        if serializer.is_valid():
            return dict(serializer.validated_data)
    except (
        DeuzAPIException
    ) as error:  # raised by a validator (the core's messages check)
        raise FrameError("invalid_field", str(error.detail)) from None
    detail = serializer.errors
    first = error_item(field_problems(detail)[0])
    raise FrameError(_code(detail), f"{first['field']}: {first['message']}") from None


def _code(detail: Any) -> str:
    """``missing_field`` or ``unknown_agent`` when the first error says so, else
    ``invalid_field``."""
    while isinstance(detail, dict | list) and detail:
        detail = next(iter(detail.values())) if isinstance(detail, dict) else detail[0]
    code = getattr(detail, "code", None)
    if code == "required":
        return "missing_field"
    if code == "unknown_agent":
        return "unknown_agent"
    return "invalid_field"


def service_error(error: Exception) -> FrameError:
    """A service error (run busy, not permitted, a refused token, …) with the code and
    message the REST API answers it with; anything else is logged and answered with
    ``internal_error`` — the socket stays open, as it would answer a 500 over HTTP."""
    translated = translate(error)
    if not isinstance(translated, exceptions.APIException):
        logger.error("deuz: a frame failed", exc_info=error)
        return FrameError("internal_error", "the server could not handle this frame")
    codes = translated.get_codes()
    code = codes if isinstance(codes, str) else translated.default_code
    return FrameError(str(code), str(translated.detail))
