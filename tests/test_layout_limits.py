"""The package's layout shows its architecture: no module over 400 lines (a longer one is
two concepts sharing a room), no function over 60, and at most 15 modules at the top of
``deuz_django`` — the front door; everything else lives in a package named for what it
holds (docs/architecture.md). Migrations are generated, and left out."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "deuz_django"
MODULE_LINES = 400
FUNCTION_LINES = 60
TOP_LEVEL_MODULES = 15


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


def shown(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function and method: from its ``def`` line
    (decorators left out) through its last line."""
    return [
        (node.name, node.lineno, node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
    ]


def test_no_module_is_longer_than_400_lines() -> None:
    long = [
        f"{shown(path)} ({lines})"
        for path in modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    ]
    assert not long, f"modules over {MODULE_LINES} lines: {', '.join(long)}"


def test_no_function_is_longer_than_60_lines() -> None:
    long = [
        f"{shown(path)}:{line} {name} ({length})"
        for path in modules()
        for name, line, length in function_lengths(path.read_text())
        if length > FUNCTION_LINES
    ]
    assert not long, f"functions over {FUNCTION_LINES} lines: {', '.join(long)}"


def test_at_most_15_modules_sit_at_the_top_of_the_package() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, (
        f"{len(top)} modules directly in deuz_django/ (at most {TOP_LEVEL_MODULES}): "
        f"{', '.join(top)}"
    )


def test_a_function_is_measured_from_its_def_line_to_its_last() -> None:
    source = "@decorated\ndef f():\n    pass\n\n    return 1\n\n\nasync def g(): ...\n"
    assert function_lengths(source) == [("f", 2, 4), ("g", 8, 1)]
