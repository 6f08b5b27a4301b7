"""What both adapters share: an SDK client, one streamed POST per step, error mapping.

Each step is one streamed request through the SDK client's own machinery —
``client.post(path, stream=True, stream_cls=AsyncStream[object])``, the SDKs' documented
way to make custom requests — so auth, retries, timeouts, server-sent-event decoding and
HTTP error classes are the SDK's. Events arrive as plain JSON rather than SDK models:
building a model per event costs the OpenAI SDK about 100 µs and the Anthropic SDK about
30 µs, several times everything else on the path (``benchmarks/provider_overhead.py``).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from types import ModuleType
from typing import Any, ClassVar

from ..model import ModelEvent, ModelRequest
from ..parts import FinishPart
from ._errors import malformed, map_error


class StreamReader(abc.ABC):
    """Turns one response's events into model events."""

    def __init__(self, provider: str) -> None:
        self.provider = provider

    def read(self, event: Any) -> Sequence[ModelEvent]:
        """The model events for one decoded JSON event; a shape it cannot read is a
        :class:`~deuz_django.core.exceptions.MalformedEventError`."""
        try:
            return self._read(event)
        except (AttributeError, KeyError, TypeError) as exc:
            raise malformed(self.provider, exc) from exc

    # -- methods that subclasses must implement -------------------------------------------

    @abc.abstractmethod
    def _read(self, event: Any) -> Sequence[ModelEvent]:
        """The events for ``event``; raise ``TypeError``/``KeyError`` on a bad shape."""

    @abc.abstractmethod
    def finish(self) -> FinishPart:
        """The finish part once the stream ended; raise
        :class:`~deuz_django.core.exceptions.ModelConnectionError` if it ended early."""


class SDKModel(abc.ABC):
    """A :class:`~deuz_django.core.model.LanguageModel` over an official async SDK."""

    path: ClassVar[str]  # the streamed endpoint
    request_options: ClassVar[Mapping[str, Any]] = {}

    def __init__(
        self,
        model: str,
        *,
        sdk: ModuleType,
        client: Any,
        provider: str,
        extra_body: Mapping[str, Any] | None,
    ) -> None:
        self._sdk = sdk
        self.client = client
        self.provider = provider
        self._model = model
        self._extra_body = dict(extra_body or {})

    @property
    def model_id(self) -> str:
        return self._model

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        reader = self._reader()
        try:
            stream = await self.client.post(
                self.path,
                body={**self._body(request), **self._extra_body},
                options=self.request_options,
                cast_to=object,
                stream=True,
                stream_cls=self._sdk.AsyncStream[object],
            )
            async with stream:  # closes the HTTP response on abort (aclose) too
                async for event in stream:
                    for part in reader.read(event):
                        yield part
            yield reader.finish()
        except Exception as exc:
            mapped = map_error(exc, sdk=self._sdk, provider=self.provider)
            if mapped is exc:
                raise
            raise mapped from exc

    # -- methods that subclasses must implement -------------------------------------------

    @abc.abstractmethod
    def _body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body for one step (``extra_body`` is merged over it)."""

    @abc.abstractmethod
    def _reader(self) -> StreamReader:
        """A fresh reader for one response."""


def build_client(sdk_class: Any, **settings: Any) -> Any:
    """An SDK client from the settings given, the SDK's defaults for the rest."""
    return sdk_class(**{k: v for k, v in settings.items() if v is not None})
