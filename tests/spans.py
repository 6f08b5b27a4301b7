"""Collecting OpenTelemetry spans in tests: in memory here, as JSON lines from a subprocess.

``recording()`` points the global tracer provider at an in-memory exporter for one test
(OpenTelemetry lets a process set its provider only once, so the getter is patched).
A subprocess started with ``DEUZ_TEST_SPAN_FILE`` set exports every finished span to that
file as one JSON object per line (``install_file_exporter``, called from tests/settings.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

SPAN_FILE_ENV = "DEUZ_TEST_SPAN_FILE"


@dataclass(frozen=True)
class SpanRecord:
    """What a test checks of a span, the same whether it was kept in memory or read back."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]
    status: str
    start_ns: int
    end_ns: int

    @classmethod
    def of(cls, span: ReadableSpan) -> SpanRecord:
        context = span.get_span_context()
        assert context is not None
        return cls(
            name=span.name,
            trace_id=format(context.trace_id, "032x"),
            span_id=format(context.span_id, "016x"),
            parent_id=format(span.parent.span_id, "016x") if span.parent else None,
            attributes=dict(span.attributes or {}),
            status=span.status.status_code.name,
            start_ns=span.start_time or 0,
            end_ns=span.end_time or 0,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "attributes": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in self.attributes.items()
            },
        }


class JsonLinesExporter(SpanExporter):
    """Appends each span to ``path`` as a JSON line, flushed at once (a SIGKILL may follow)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                out.write(json.dumps(SpanRecord.of(span).to_json()) + "\n")
        return SpanExportResult.SUCCESS


def install_file_exporter(path: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)


def read_span_file(path: Path) -> list[SpanRecord]:
    if not path.exists():
        return []
    return [
        SpanRecord(**json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line
    ]


class Recorded:
    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.exporter = exporter

    def spans(self) -> list[SpanRecord]:
        return [SpanRecord.of(s) for s in self.exporter.get_finished_spans()]


@contextmanager
def recording(monkeypatch: Any) -> Iterator[Recorded]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    try:
        yield Recorded(exporter)
    finally:
        provider.shutdown()


def named(spans: Sequence[SpanRecord], name: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == name]


def one(spans: Sequence[SpanRecord], name: str) -> SpanRecord:
    found = named(spans, name)
    assert len(found) == 1, f"{name}: {[s.name for s in spans]}"
    return found[0]
