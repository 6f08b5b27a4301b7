"""The contract suites: one shared set of tests every backend passes (STYLE rule 3).

Subclass a contract in a ``Test…`` class of your own test suite and give it the fixtures it
names; pytest then runs every test of the contract against your backend::

    import pytest
    from deuz_django.core.testing.contracts import SessionStoreContract, StreamJournalContract

    class TestMyStore(SessionStoreContract):
        @pytest.fixture
        def store(self):
            return MyStore(...)            # a fresh, empty store

    class TestMyJournal(StreamJournalContract):
        @pytest.fixture
        def journal(self):
            return MyJournal(...)

        @pytest.fixture
        def stream_id(self):
            return "run-1"                 # a stream the journal may write

    class TestMyForkingStore(ForkingStoreContract):
        @pytest.fixture
        def store(self):
            return MyStore(...)            # a fresh store that forks, with a step_journal

    class TestMyInputQueue(InputQueueContract):
        @pytest.fixture
        def store(self):
            return MyStore(...)            # a fresh store whose input_queue is tested

    class TestMyStepJournal(StepJournalContract):
        @pytest.fixture
        def step_journal(self):
            return MyStepJournal(...)

        @pytest.fixture
        def run_id(self):
            return "run-1"                 # a run the journal may write

The async tests need pytest-asyncio (``asyncio_mode = "auto"``). This package imports
pytest; :mod:`deuz_django.core.testing` does not.
"""

import pytest

# Failing asserts in the contracts then explain themselves as they do in a test module.
pytest.register_assert_rewrite(
    "deuz_django.core.testing.contracts.forked_runs",
    "deuz_django.core.testing.contracts.forking",
    "deuz_django.core.testing.contracts.inputs",
    "deuz_django.core.testing.contracts.journal",
    "deuz_django.core.testing.contracts.step_journal",
    "deuz_django.core.testing.contracts.store",
)

from .forking import ForkingStoreContract  # noqa: E402
from .inputs import InputQueueContract  # noqa: E402
from .journal import StreamJournalContract  # noqa: E402
from .samples import FixedClock, make_checkpoint  # noqa: E402
from .step_journal import StepJournalContract  # noqa: E402
from .store import SessionStoreContract  # noqa: E402

__all__ = [
    "FixedClock",
    "ForkingStoreContract",
    "InputQueueContract",
    "SessionStoreContract",
    "StepJournalContract",
    "StreamJournalContract",
    "make_checkpoint",
]
