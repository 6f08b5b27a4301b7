"""Run a script in a fresh interpreter where some packages cannot be imported, as if they
were not installed: the check that an optional dependency really is optional."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[2]

_BLOCKER = textwrap.dedent(
    """
    import sys

    class Blocker:
        BLOCKED = {blocked!r}

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ImportError(f"{{name}} is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())
    for _name in list(sys.modules):
        if _name.split(".")[0] in Blocker.BLOCKED:
            del sys.modules[_name]
    """
)


def run_without(
    blocked: tuple[str, ...], script: str
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (dedented) with the top-level packages ``blocked`` unimportable;
    the script can name them as ``Blocker.BLOCKED``."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            _BLOCKER.format(blocked=blocked) + textwrap.dedent(script),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
