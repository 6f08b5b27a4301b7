"""The API's Swagger UI renders its operations with no network: its scripts and styles
come from the project's static files (drf-spectacular-sidecar), never from a CDN."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Browser, expect

from tests.live_site import Daphne

from .conftest import SCREENS, new_context, offline


@SCREENS
def test_the_api_docs_render_every_operation_offline(
    browser: Browser, server: Daphne, screen: dict[str, Any]
) -> None:
    context = new_context(browser, server, **screen)
    refused = offline(context, server)
    try:
        page = context.new_page()
        page.goto("/api/deuz/docs/")
        operations = page.locator(".opblock-summary")
        expect(operations.first).to_be_visible(timeout=15_000)
        paths = page.locator(".opblock-summary-path").all_inner_texts()
        assert "/api/deuz/runs/" in paths
        assert "/api/deuz/runs/{runId}/verdicts/" in [
            p.replace("\u200b", "") for p in paths
        ]
        expect(page.get_by_role("heading", name="Deuz API")).to_be_visible()
        assert refused == []
    finally:
        context.close()
