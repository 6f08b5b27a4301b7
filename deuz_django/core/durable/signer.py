"""HMAC-signed approval tokens: a verdict from a browser is untrusted input (SPEC §10).

The server signs each pending approval before showing it; an approving verdict must bring
the token back, so a forged or replayed verdict cannot authorize another call. A token looks
like this (secret ``"s3cret"``, clock at ``1700000000123``)::

    >>> signer = create_approval_signer(secret="s3cret", clock=clock)
    >>> token = signer.sign(
    ...     {"approvalId": "c1", "toolCallId": "c1", "toolName": "pay", "input": {"usd": 100}},
    ...     run_id="run-42",
    ... )
    >>> token
    'v1.eyJhcHByb3ZhbElkIjoiYzEiLCJ0b29sQ2FsbElkIjoiYzEiLCJ0b29sTmFtZSI6InBheSIsImlucHV0Ijp7InVzZCI6MTAwfSwicnVuSWQiOiJydW4tNDIiLCJpc3N1ZWRBdCI6MTcwMDAwMDAwMDEyM30.joO1F5vts7mvUGyX3gV7RF5q0iR6arL0yRyfA5evdJY'

Three parts separated by ``.``: the version ``v1``; the body, the unpadded base64url of the
UTF-8 JSON payload (the request's keys in the caller's order, then ``runId`` when bound,
then ``issuedAt`` in ms); and the MAC, the unpadded base64url of HMAC-SHA256 keyed with the
UTF-8 secret over the literal text ``v1.<body>``. Anyone can read the body, so a request
must hold no secrets. ``verify`` gives the payload back::

    >>> signer.verify(token)
    {'approvalId': 'c1', 'toolCallId': 'c1', 'toolName': 'pay', 'input': {'usd': 100},
     'runId': 'run-42', 'issuedAt': 1700000000123}

Tokens are byte-identical to the TypeScript reference's. Unlike the reference, ``verify``
accepts only the canonical encoding of each segment (D3), so every token has exactly one
spelling. ``fallback_secrets`` keep tokens minted before a key rotation valid; new tokens
always use ``secret``.

``verify`` does not compare the payload with a pending call; :func:`token_problem` does, and
says why a token does not authorize a call (D4). The loop's settle and every surface that
takes a verdict ask it::

    >>> call = ToolCall("c1", "pay", {"usd": 100})
    >>> token_problem(token, call, signer=signer, run_id="run-42", max_age_ms=None) is None
    True
    >>> problem = token_problem(token, call, signer=signer, run_id="run-7", max_age_ms=None)
    >>> problem.code, problem.message
    ('other_run', 'the token was minted for another run')
"""

from __future__ import annotations

import base64
import enum
import hmac
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .. import _jsjson
from ..approvals import ApprovalSignerLike, ToolApprovalRequest
from ..deps import SystemClock
from ..tools import ToolCall

_VERSION = "v1"
_MAC_LENGTH = 43  # 32 bytes of HMAC-SHA256, unpadded base64url
_URL_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


class _Clock(Protocol):
    def now(self) -> float: ...


class ApprovalSigner:
    """Mints approval tokens with the primary secret and verifies them against every secret.

    Build it with :func:`create_approval_signer`.
    """

    __slots__ = ("_clock", "_keys")

    def __init__(
        self,
        *,
        secret: str,
        clock: _Clock | None = None,
        fallback_secrets: Sequence[str] = (),
    ) -> None:
        # SPEC R10.1: the reference's message, raised at construction.
        if not isinstance(secret, str) or not secret:
            raise TypeError(
                "createApprovalSigner: `secret` must be a non-empty string."
            )
        # An empty fallback would be a key everyone knows; a bare string would be its letters.
        if isinstance(fallback_secrets, str) or not all(
            isinstance(s, str) and s for s in fallback_secrets
        ):
            raise TypeError(
                "createApprovalSigner: `fallback_secrets` must be a sequence of "
                "non-empty strings."
            )
        self._keys = tuple(s.encode() for s in (secret, *fallback_secrets))
        self._clock: _Clock = clock if clock is not None else SystemClock()

    def sign(
        self,
        request: ToolApprovalRequest | Mapping[str, Any],
        run_id: str | None = None,
    ) -> str:
        """A token over every key of ``request``, bound to ``run_id`` when given (R10.2).

        Raises :class:`TypeError` when the request holds a value JSON cannot, such as bytes.
        """
        payload = dict(
            request.to_json() if isinstance(request, ToolApprovalRequest) else request
        )
        # Assignment keeps the position of a key the request already has, as JS spread does.
        if run_id is not None:
            payload["runId"] = run_id
        payload["issuedAt"] = self._clock.now()
        body = _b64url_encode(_jsjson.dumps(payload).encode())
        return f"{_VERSION}.{body}.{_b64url_encode(_mac(self._keys[0], body))}"

    def verify(
        self, token: object, max_age_ms: float | None = None
    ) -> dict[str, Any] | None:
        """The signed payload, or ``None`` for anything else; never raises (R10.5).

        A token whose age is ``max_age_ms`` or more is expired; ``None`` means no expiry.
        """
        if not isinstance(token, str):
            return None
        segments = token.split(".")
        if len(segments) != 3:
            return None
        version, body, mac_segment = segments
        if version != _VERSION or not body or len(mac_segment) != _MAC_LENGTH:
            return None
        # Both segments must be canonical (D3); the body is parsed only once authenticated.
        raw_body = _b64url_decode(body)
        mac = _b64url_decode(mac_segment)
        if raw_body is None or mac is None:
            return None
        if not any(hmac.compare_digest(mac, _mac(key, body)) for key in self._keys):
            return None
        try:
            payload = _jsjson.loads(raw_body.decode("utf-8"))
        except ValueError:
            return None
        if not isinstance(payload, dict):
            return None
        issued_at = payload.get("issuedAt")
        if isinstance(issued_at, bool) or not isinstance(issued_at, int | float):
            return None
        if max_age_ms is not None and self._clock.now() - issued_at >= max_age_ms:
            return None
        return payload


def create_approval_signer(
    *,
    secret: str,
    clock: _Clock | None = None,
    fallback_secrets: Sequence[str] = (),
) -> ApprovalSigner:
    """A signer keyed by ``secret``; ``clock.now()`` gives ``issuedAt`` in ms (R10.1)."""
    return ApprovalSigner(secret=secret, clock=clock, fallback_secrets=fallback_secrets)


class TokenProblem(enum.Enum):
    """Why a token does not authorize a call: ``code`` for machines, ``message`` for people."""

    MISSING = "missing", "an approving verdict needs the approval's token"
    INVALID = "invalid", "the token is forged, tampered with or garbled"
    OTHER_RUN = "other_run", "the token was minted for another run"
    OTHER_CALL = "other_call", "the token was minted for another call"
    EXPIRED = "expired", "the token has expired"

    def __new__(cls, code: str, message: str) -> TokenProblem:
        member = object.__new__(cls)
        member._value_ = code
        return member

    def __init__(self, code: str, message: str) -> None:
        self.message = message

    @property
    def code(self) -> str:
        return str(self.value)


def token_problem(
    token: str | None,
    call: ToolCall,
    *,
    signer: ApprovalSignerLike,
    run_id: str | None,
    max_age_ms: float | None,
) -> TokenProblem | None:
    """Why ``token`` does not authorize exactly ``call`` on run ``run_id``; ``None`` if it does.

    SPEC R10.9 with D4: the token verifies; it is bound to ``run_id`` (unless ``run_id`` is
    ``None``, a call without a durable session); its ``approvalId``, ``toolName`` and
    ``input`` are the call's (compared as JSON values); and it is younger than
    ``max_age_ms`` (``None``: no limit). The checks run in that order, so a stale token
    for another run is reported as for another run.
    """
    if not token:
        return TokenProblem.MISSING
    payload = signer.verify(token)
    if payload is None:
        return TokenProblem.INVALID
    if run_id is not None and payload.get("runId") != run_id:
        return TokenProblem.OTHER_RUN
    if (
        payload.get("approvalId") != call.tool_call_id
        or payload.get("toolName") != call.tool_name
        or not _json_equal(payload.get("input"), call.args)
    ):
        return TokenProblem.OTHER_CALL
    if max_age_ms is not None and signer.verify(token, max_age_ms) is None:
        return TokenProblem.EXPIRED
    return None


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``True`` is not ``1``, a tuple equals the list it encodes."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(
            _json_equal(x, y) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _mac(key: bytes, body: str) -> bytes:
    # The MAC covers the literal text of the first two segments.
    return hmac.digest(key, f"{_VERSION}.{body}".encode(), "sha256")


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64url_decode(segment: str) -> bytes | None:
    """Strict decoding (D3): URL alphabet, no padding or whitespace, canonical last char."""
    if len(segment) % 4 == 1 or not _URL_ALPHABET.fullmatch(segment):
        return None
    raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    return raw if _b64url_encode(raw) == segment else None
