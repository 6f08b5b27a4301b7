"""MkDocs hook: docstrings cross-reference in Sphinx's roles (``:func:`name```), which
Markdown renders as the role's name before the code. Keep the code, drop the role, and
show ``~a.b.Name`` as ``Name``, as Sphinx would."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|exc|obj):(?=<code>)")
SHORT = re.compile(r"<code>~(?:[\w]+\.)*([\w]+)</code>")


def on_page_content(html: str, **kwargs: Any) -> str:
    return SHORT.sub(r"<code>\1</code>", ROLE.sub("", html))
