"""Errors in A2A's REST shape (``google.rpc.Status`` with an ``ErrorInfo`` reason the
SDK's clients map back to their exception classes).

The app's refusals keep their meaning: a task the caller may not see is
``TASK_NOT_FOUND`` (404, never a hint that it exists); a refused verdict — bad token,
not permitted, decided already — is ``INVALID_PARAMS`` (400) with the app's own
``code`` in the metadata and its message naming what was wrong."""

from __future__ import annotations

import logging

from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig
from django.http import JsonResponse
from rest_framework.exceptions import APIException, NotFound

from ...core.exceptions import DeuzError
from ...exceptions import (
    NotPermitted,
    RunBusy,
    RunNotFound,
    RunNotStoppable,
    UnknownAgent,
)

logger = logging.getLogger("deuz_django")


class NotSignedIn(A2AError):
    """No credentials, or bad ones: answered 401 (A2A has no reason of its own)."""

    message = "Sign in: send 'Authorization: Token <key>' or a session cookie."


def a2a_error(error: Exception) -> A2AError:
    """The A2A error a refusal of the app (or of DRF's checks) is."""
    match error:
        case A2AError():
            return error
        case RunNotFound() | UnknownAgent() | NotFound() | ObjectDoesNotExist():
            return TaskNotFoundError()
        case RequestDataTooBig():
            return InvalidRequestError("The body is larger than this server takes.")
        case RunNotStoppable():
            return TaskNotCancelableError(str(error))
        case RunBusy():
            return UnsupportedOperationError(str(error))
        case APIException():
            codes = error.get_codes()
            code = codes if isinstance(codes, str) else error.default_code
            return InvalidParamsError(str(error.detail), data={"code": str(code)})
        case NotPermitted() | DeuzError() | ValueError():
            return InvalidParamsError(str(error))
    logger.error("A2A request failed", exc_info=error)
    return InternalError()


def error_response(error: Exception) -> JsonResponse:
    refusal = a2a_error(error)
    if isinstance(refusal, NotSignedIn):
        body = {
            "error": {
                "code": 401,
                "status": "UNAUTHENTICATED",
                "message": refusal.message,
            }
        }
        return JsonResponse(body, status=401, headers={"WWW-Authenticate": "Token"})
    mapping = A2A_ERROR_MAPPING.get(type(refusal))
    return JsonResponse(
        build_rest_error_payload(refusal),
        status=mapping.http_code if mapping else 500,
    )
