"""The agents registry: how any process rebuilds a run's model and tools by name."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from deuz_django.exceptions import UnknownAgent
from deuz_django.registry import AgentSpec, agent_names, find_tool, load_agent
from tests.django import agents


def build() -> AgentSpec:
    return AgentSpec(model=agents.scripted.model, max_steps=3)


def test_the_demo_agent_is_registered_under_its_name() -> None:
    assert settings.DEUZ["AGENTS"]["assistant"] == "example_project.agents.assistant"
    assert "assistant" in agent_names()
    assert isinstance(load_agent("assistant"), AgentSpec)


def test_a_registered_callable_builds_the_spec_on_each_load() -> None:
    registered = {
        **settings.DEUZ["AGENTS"],
        "built": "tests.django.test_registry.build",
    }
    with override_settings(DEUZ={**settings.DEUZ, "AGENTS": registered}):
        first, second = load_agent("built"), load_agent("built")
    assert first.max_steps == 3
    assert first is not second


def test_an_unknown_name_lists_the_registered_agents() -> None:
    with pytest.raises(
        UnknownAgent, match=r"Unknown agent 'nobody' \(registered: .*gated"
    ):
        load_agent("nobody")


def test_a_dotted_path_to_something_else_is_refused() -> None:
    registered = {
        **settings.DEUZ["AGENTS"],
        "odd": "tests.django.agents.TOOL_PERMISSION",
    }
    with (
        override_settings(DEUZ={**settings.DEUZ, "AGENTS": registered}),
        pytest.raises(UnknownAgent, match="is not an AgentSpec"),
    ):
        load_agent("odd")


def test_call_options_carry_the_model_tools_and_options() -> None:
    options = load_agent("gated").call_options()
    assert set(options) == {"model", "tools", "max_steps"}
    assert sorted(options["tools"]) == ["refund", "send_email"]


def test_a_sub_agents_tool_is_found_along_the_agent_path() -> None:
    tools = load_agent("nested").tool_set
    assert find_tool(tools, "send_email", ["researcher"]) is agents.send_email
    assert find_tool(tools, "researcher", []) is tools["researcher"]
    assert find_tool(tools, "send_email", []) is None
    assert find_tool(tools, "send_email", ["nobody"]) is None


def test_an_agent_queues_input_unless_it_says_otherwise() -> None:
    assert load_agent("scripted").steering == "enqueue"
    assert load_agent("echoer_interrupt").steering == "interrupt"


def test_an_unknown_steering_policy_is_a_configuration_error() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=r"AgentSpec\.steering: expected"):
        AgentSpec(model=agents.scripted.model, steering="queue")  # type: ignore[arg-type]
