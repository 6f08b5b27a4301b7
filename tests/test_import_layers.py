"""No import cycles among ``deuz_django``'s modules: every module sits above the ones it
imports. Read from the source — every import, also inside functions and under
``if TYPE_CHECKING:`` — so a lazy or type-only import that dodges a cycle counts as the
cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "deuz_django"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # a submodule, or a name the module defines
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return {module for module in found if module in known and module != name}


def graph() -> dict[str, set[str]]:
    paths = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    known = {module_name(p) for p in paths}
    return {module_name(p): imports(p, known) for p in paths}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return found


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_reader_of_cycles_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_live_sits_below_the_legs_and_the_run_service() -> None:
    edges = graph()
    assert "deuz_django.streaming.live" in edges["deuz_django.runs.legs"]
    assert not edges["deuz_django.streaming.live"] & {
        "deuz_django.runs.legs",
        "deuz_django.services",
        "deuz_django.runs.continuing",
    }


# The layers of docs/architecture.md, lowest first: a module imports only from its own
# layer or below. A module is in the layer of the longest prefix that names it; the
# package itself and a top-level module no layer names are in the front door's.
LAYERS = tuple(
    layer.split()
    for layer in (
        "core",
        "conf exceptions signals _moved",
        "models permissions registry deadlines deadlines.rows rules.conditions runs.limits",
        "storage",
        "approvals rules notifications streaming.live runs.stopping runs.steering "
        "runs.transcript runs.threads runs.draining runs.recoverable runs.lease_renewal "
        "runs.replays",
        "runs.claims runs.legs runs.outcomes runs.tasks runs.handed_off",
        "services runs.continuing runs.forking runs.recovery deadlines.sweep "
        "streaming.following checks apps",
        "api admin dashboard management streaming approvals.link_views "
        "approvals.page_verdicts urls routing asgi protocols",
    )
)
FRONT_DOOR = 1


def layer(module: str) -> int:
    name = module.removeprefix("deuz_django").removeprefix(".")
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if name == prefix or name.startswith(f"{prefix}.")
    ]
    return max(matches)[1] if matches else FRONT_DOOR


def test_every_module_imports_only_its_layer_or_below() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target in targets
        if layer(target) > layer(module)
    )
    assert upward == []


def test_the_layers_read_as_documented() -> None:
    assert layer("deuz_django.core._loop.engine") == 0
    assert layer("deuz_django") == 1
    assert layer("deuz_django.deadlines") == 2
    assert layer("deuz_django.deadlines.sweep") == 6
    assert layer("deuz_django.approvals.verdicts") == 4
    assert layer("deuz_django.approvals.link_views") == 7
    assert layer("deuz_django.streaming.consumers") == 7
