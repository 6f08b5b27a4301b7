"""The documentation keeps up with the code: every ``DEUZ`` setting and every system
check id is on the settings page, and every relative link of the front page (README.md,
which the docs site does not build) leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

from deuz_django import checks
from deuz_django.conf import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_PAGE = (ROOT / "docs" / "settings-and-checks.md").read_text()


def test_every_setting_is_documented() -> None:
    missing = [name for name in DEFAULTS if f"| `{name}` |" not in SETTINGS_PAGE]
    assert missing == []


def test_every_system_check_id_is_documented() -> None:
    sources = [
        Path(checks.__file__),
        *(ROOT / "deuz_django" / "notifications").glob("*.py"),
    ]
    ids = {
        found
        for source in sources
        for found in re.findall(r"deuz_django\.[EW]\d{3}", source.read_text())
    }
    assert len(ids) >= 17
    missing = sorted(i for i in ids if f"| `{i}` |" not in SETTINGS_PAGE)
    assert missing == []


def test_the_front_page_links_only_to_files_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    relative = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert relative, "the front page links into docs/"
    assert [t for t in relative if not (ROOT / t).exists()] == []


def test_the_front_page_shows_no_relative_image() -> None:
    """A package index cannot show an image by a relative path."""
    readme = (ROOT / "README.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)", readme)
    images += re.findall(r"<img[^>]*src=\"([^\"]+)\"", readme)
    assert [i for i in images if not i.startswith("https://")] == []
