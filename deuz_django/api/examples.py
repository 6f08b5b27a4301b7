"""The examples the API's OpenAPI description shows (:mod:`deuz_django.api.docs`): an error
body for each status, and a run, an approval, a resume answer and a replay's comparison
as a client sees them."""

from __future__ import annotations

from typing import Any

ERRORS = {
    400: (
        "The body or a query parameter is invalid; `errors` names each field.",
        {
            "detail": 'status: "paused" is not a valid choice.',
            "code": "invalid",
            "errors": [
                {"field": "status", "message": '"paused" is not a valid choice.'}
            ],
        },
    ),
    401: (
        "Not signed in (send a session cookie or `Authorization: Token <key>`).",
        {
            "detail": "Authentication credentials were not provided.",
            "code": "not_authenticated",
        },
    ),
    403: (
        "Signed in, but not allowed (permissions, separation of duties, CSRF).",
        {"detail": "You may not resume this run.", "code": "permission_denied"},
    ),
    404: (
        "No such run, or one you may not see; or a page past the last.",
        {"detail": "No run 'run-42'.", "code": "not_found"},
    ),
    409: (
        "The run is busy or completed, approvals are undecided, or already decided.",
        {
            "detail": "Run 'run-42' is busy: another leg is running it. "
            "Try again when it ends.",
            "code": "run_busy",
        },
    ),
    413: (
        "The body is larger than `DATA_UPLOAD_MAX_MEMORY_SIZE`.",
        {
            "detail": "The request body is larger than 2621440 bytes.",
            "code": "payload_too_large",
            "errors": [{"field": "body", "message": "larger than 2621440 bytes"}],
        },
    ),
    415: (
        "The body is not `application/json`.",
        {
            "detail": 'Unsupported media type "text/plain" in request.',
            "code": "unsupported_media_type",
        },
    ),
    429: (
        "Too many requests (see `REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']`).",
        {
            "detail": "Request was throttled. Expected available in 12 seconds.",
            "code": "throttled",
        },
    ),
}


BAD_TOKEN = {
    "detail": "Verdict 1 (r1), token: the token was minted for another run. "
    "Nothing was recorded.",
    "code": "invalid_verdict",
    "errors": [
        {
            "index": 1,
            "approvalId": "r1",
            "field": "token",
            "message": "the token was minted for another run",
        }
    ],
}


OWN_CALL = {
    "detail": "Verdict 0 (r1), approvalId: The run's owner may not approve their own "
    "refund call. Nothing was recorded.",
    "code": "not_permitted",
    "errors": [
        {
            "index": 0,
            "approvalId": "r1",
            "field": "approvalId",
            "message": "The run's owner may not approve their own refund call.",
        }
    ],
}


BAD_MESSAGE = {
    "detail": "messages[0].role: expected system, user, assistant or tool, got 'bot'",
    "code": "invalid",
    "errors": [
        {
            "field": "messages[0].role",
            "message": "expected system, user, assistant or tool, got 'bot'",
        }
    ],
}


UNDECIDED = {
    "detail": "Run 'run-42' still waits for a verdict on r1; decide it first, or resume "
    "now to deny what is undecided.",
    "code": "run_not_resumable",
}


TOKEN = "v1.eyJhcHByb3ZhbElkIjoiZTEiLCJ0b29sTmFtZSI6InNlbmRfZW1haWwifQ.<mac>"


APPROVAL: dict[str, Any] = {
    "approvalId": "e1",
    "runId": "run-42",
    "toolCallId": "e1",
    "toolName": "send_email",
    "input": {"to": "ann@example.com"},
    "agentPath": [],
    "token": TOKEN,
    "status": "pending",
    "decidedBy": None,
    "decidedOnBehalfOf": None,
    "automaticDecision": None,
    "approvalProgress": None,
    "decidedAt": None,
    "reason": "",
    "createdAt": "2026-01-05T10:00:00Z",
    "deadline": "2026-01-05T11:00:00Z",
    "remindAt": "2026-01-05T10:30:00Z",
    "remindedAt": None,
    "escalateTo": None,
    "escalatedAt": None,
}


RUN = {
    "runId": "run-42",
    "agent": "assistant",
    "owner": "ann",
    "title": "Email the customer",
    "status": "suspended",
    "stepIndex": 1,
    "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    "messageCount": 2,
    "lastError": "",
    "busy": False,
    "pendingApprovals": [APPROVAL],
    "forkedFrom": None,
    "forks": [],
    "createdAt": "2026-01-05T10:00:00Z",
    "updatedAt": "2026-01-05T10:00:01Z",
    "replayOf": None,
    "url": "http://127.0.0.1:8000/api/deuz/runs/run-42/",
}

REPLAY = {
    **RUN,
    "runId": "run-43",
    "agent": "assistant_v2",
    "title": "Replay of Email the customer",
    "status": "running",
    "stepIndex": 0,
    "usage": {},
    "messageCount": 2,
    "pendingApprovals": [],
    "replayOf": "run-42",
    "url": "http://127.0.0.1:8000/api/deuz/runs/run-43/",
}

_EMAIL = {"toolName": "send_email", "input": {"to": "ann@example.com"}}
COMPARISON = {
    "original": {"runId": "run-42", "agent": "assistant", "status": "completed"},
    "replay": {"runId": "run-43", "agent": "assistant_v2", "status": "stopped"},
    "replayOptions": {"agent": "assistant_v2", "system": None},
    "stopped": "Stopped by the system: The replayed model asked for "
    'send_email({"to": "bob@example.com"}), which the original run never made; it '
    "was not executed, and the replay stops here.",
    "same": False,
    "firstDivergence": 0,
    "steps": [
        {
            "index": 0,
            "same": False,
            "differences": ["calls"],
            "original": {
                "text": "",
                "calls": [
                    {
                        **_EMAIL,
                        "result": "sent",
                        "isError": False,
                        "answered": True,
                        "onlyHere": True,
                    }
                ],
            },
            "replay": {
                "text": "",
                "calls": [
                    {
                        "toolName": "send_email",
                        "input": {"to": "bob@example.com"},
                        "result": None,
                        "isError": False,
                        "answered": False,
                        "onlyHere": True,
                    }
                ],
            },
        }
    ],
}


LINK = {
    "runId": "run-42",
    "detail": "Resumed: it continues on this server.",
    "resumeQueued": True,
    "statusUrl": "http://127.0.0.1:8000/api/deuz/runs/run-42/",
}


FORK = {
    **RUN,
    "runId": "run-43",
    "title": "Fork of Email the customer",
    "status": "running",
    "stepIndex": 1,
    "usage": {},
    "pendingApprovals": [],
    "forkedFrom": {
        "runId": "run-42",
        "step": 1,
        "withTurn": True,
        "edit": {"toolCallId": "e1", "input": {"to": "bob@example.com"}},
    },
    "url": "http://127.0.0.1:8000/api/deuz/runs/run-43/",
}


BAD_FORK = {
    "detail": "edit.toolCallId: the turn of step 1 has no call 'e9' (its calls: e1)",
    "code": "invalid",
    "errors": [
        {
            "field": "edit.toolCallId",
            "message": "the turn of step 1 has no call 'e9' (its calls: e1)",
        }
    ],
}
