"""``deuz_django.core.testing`` ships the test doubles without needing test tools; its
``contracts`` package is the one place that imports pytest (STYLE rules 1 and 3)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys

    class BlockPytest:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pytest", "_pytest"):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, BlockPytest())
    from deuz_django.core.testing import FunctionModel, ScriptedModel, reply

    print(ScriptedModel([reply(text="hi")]).model_id, FunctionModel.__name__)
    try:
        import deuz_django.core.testing.contracts
    except ImportError as error:
        print("contracts:", error)
    """
)


def test_the_test_doubles_import_without_pytest() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "scripted FunctionModel",
        "contracts: pytest is blocked in this test",
    ]
