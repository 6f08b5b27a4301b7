"""``{% deuz_chat %}``: the chat component on a page, its addresses from the project's URLs."""

from __future__ import annotations

from types import SimpleNamespace

from django.template import engines


def render(source: str, **context: object) -> str:
    page = engines["django"].from_string("{% load deuz_chat %}" + source)
    return page.render(context)


def test_the_tag_loads_the_static_files_and_fills_in_every_address() -> None:
    html = render('{% deuz_chat agent="assistant" %}')

    assert (
        '<link rel="stylesheet" href="/static/deuz_django/chat/deuz-chat.css">' in html
    )
    assert (
        '<script type="module" src="/static/deuz_django/chat/deuz-chat.js"></script>'
        in html
    )
    assert (
        '<deuz-chat id="deuz-chat" agent="assistant" socket="/ws/deuz/" '
        'runs-url="/api/deuz/runs/"' in " ".join(html.split())
    )
    assert 'approvals-url="/deuz/runs/RUN_ID/approvals/"' in html
    assert 'login-url="/login/"' in html
    assert "data-prompt" not in html
    assert " run=" not in html


def test_prompts_become_buttons_and_a_run_puts_its_title_in_the_page() -> None:
    run = SimpleNamespace(run_id="r42", title="Refund <A-1>")
    html = render(
        "{% deuz_chat agent='assistant' run=run prompts=prompts placeholder='Ask…' %}",
        run=run,
        prompts=["Where is <my> order?", "Refund it"],
    )

    assert (
        '<button type="button" data-prompt>Where is &lt;my&gt; order?</button>' in html
    )
    assert '<button type="button" data-prompt>Refund it</button>' in html
    assert 'run="r42" run-title="Refund &lt;A-1&gt;"' in html
    assert 'placeholder="Ask…"' in html
