"""The Agent Card of one registered agent: who it is, where its HTTP+JSON interface
is, and how callers sign in — the API's own authentication, declared as security
schemes (a DRF token in ``Authorization: Token …``, or the Django session cookie)."""

from __future__ import annotations

from a2a.types import a2a_pb2 as a2a
from django.conf import settings
from django.http import HttpRequest

from ...registry import load_agent
from .push import push_enabled

PROTOCOL_VERSION = "1.0"
HTTP_JSON = "HTTP+JSON"
CARD_PATH = ".well-known/agent-card.json"
TOKEN_SCHEME = "token"
SESSION_SCHEME = "session"


def security_schemes() -> dict[str, a2a.SecurityScheme]:
    token = a2a.APIKeySecurityScheme(
        location="header",
        name="Authorization",
        description="A DRF token: 'Authorization: Token <key>' "
        "(rest_framework.authtoken).",
    )
    session = a2a.APIKeySecurityScheme(
        location="cookie",
        name=settings.SESSION_COOKIE_NAME,
        description="A Django session (and its CSRF token on POST).",
    )
    return {
        TOKEN_SCHEME: a2a.SecurityScheme(api_key_security_scheme=token),
        SESSION_SCHEME: a2a.SecurityScheme(api_key_security_scheme=session),
    }


def agent_card(request: HttpRequest, agent: str, base_path: str) -> a2a.AgentCard:
    """The card of ``agent``, whose interface is at ``base_path`` on this host."""
    spec = load_agent(agent)
    description = (spec.system or f"The {agent} agent.").strip()
    card = a2a.AgentCard(
        name=agent,
        description=description,
        version=PROTOCOL_VERSION,
        supported_interfaces=[
            a2a.AgentInterface(
                url=request.build_absolute_uri(base_path).rstrip("/"),
                protocol_binding=HTTP_JSON,
                protocol_version=PROTOCOL_VERSION,
            )
        ],
        capabilities=a2a.AgentCapabilities(
            streaming=True, push_notifications=push_enabled()
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            a2a.AgentSkill(
                id=name,
                name=name,
                description=tool.description or name,
                tags=["tool", "needs-approval" if tool.needs_approval else "auto"],
            )
            for name, tool in spec.tool_set.items()
        ],
    )
    for name, scheme in security_schemes().items():
        card.security_schemes[name].CopyFrom(scheme)
        requirement = card.security_requirements.add()
        requirement.schemes[name].SetInParent()
    return card
