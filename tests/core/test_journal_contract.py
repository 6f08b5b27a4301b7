import pytest

from deuz_django.core.journal import InMemoryJournal
from deuz_django.core.testing.contracts import StreamJournalContract


class TestInMemoryJournal(StreamJournalContract):
    @pytest.fixture
    def journal(self) -> InMemoryJournal:
        return InMemoryJournal()

    @pytest.fixture
    def stream_id(self) -> str:
        return "run-1"
