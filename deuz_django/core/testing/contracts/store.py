"""The contract every ``SessionStore`` passes (SPEC §6–§8; STYLE rule 3).

One test mixin, run by every store — the in-memory reference store, the Django store, any
user's own — the way Django's ``contrib/sessions`` tests run one suite on every backend.
Subclass it in a ``Test…`` class and give it a ``store`` fixture (sync or async) that
returns a fresh, empty store::

    class TestMyStore(SessionStoreContract):
        @pytest.fixture
        def store(self) -> SessionStore:
            return MyStore()

A store on a database needs the database in that fixture (with pytest-django, take the
``db`` or ``transactional_db`` fixture in it).

A store's methods may be sync or async; the contract awaits whatever they return, as the
loops do. ``delete`` and ``list`` are optional in the protocol (the loops never call them)
but required here, because the cleanup and listing tooling is built on them.
"""

from __future__ import annotations

from typing import Any

import pytest

from ... import (
    Deps,
    GenerateTextResult,
    ImagePart,
    Message,
    ToolResultPart,
    Usage,
    generate_text,
    tool,
)
from ..._awaitable import resolve
from ...durable import (
    AgentCheckpoint,
    CheckpointNotFoundError,
    CheckpointStatus,
    DurableSession,
    SessionStore,
    create_approval_signer,
    resume_from_checkpoint,
)
from ..models import ScriptedModel, reply
from .samples import PNG, FixedClock, make_checkpoint, rich_history, signed_requests


class SessionStoreContract:
    """Behaviour every store shares. Subclasses provide a ``store`` fixture."""

    # -- helpers: call a sync or an async store alike -----------------------------------

    @staticmethod
    async def save(store: Any, checkpoint: AgentCheckpoint) -> None:
        await resolve(store.save(checkpoint))

    @staticmethod
    async def load(store: Any, run_id: str) -> AgentCheckpoint | None:
        checkpoint = await resolve(store.load(run_id))
        assert checkpoint is None or isinstance(checkpoint, AgentCheckpoint)
        return checkpoint

    @staticmethod
    async def delete(store: Any, run_id: str) -> None:
        await resolve(store.delete(run_id))

    @staticmethod
    async def list_runs(store: Any) -> list[str]:
        return list(await resolve(store.list()))

    async def assert_round_trips(self, store: Any, checkpoint: AgentCheckpoint) -> None:
        expected = checkpoint.to_json()
        await self.save(store, checkpoint)
        loaded = await self.load(store, checkpoint.run_id)
        assert loaded is not None
        assert loaded.to_json() == expected

    # -- save and load ------------------------------------------------------------------

    def test_store_satisfies_the_session_store_protocol(self, store: Any) -> None:
        # SPEC R6.1
        assert isinstance(store, SessionStore)

    async def test_load_returns_an_equal_checkpoint_after_save(
        self, store: Any
    ) -> None:
        # SPEC R6.1
        await self.assert_round_trips(store, make_checkpoint("run-save"))

    async def test_latest_save_wins_per_run_id(self, store: Any) -> None:
        # SPEC R6.1: the loops save every boundary and load only the latest.
        for step in (1, 2, 3):
            await self.save(store, make_checkpoint("run-latest", step))
        loaded = await self.load(store, "run-latest")
        assert loaded is not None
        assert loaded.to_json() == make_checkpoint("run-latest", 3).to_json()

    async def test_a_later_save_wins_even_with_a_lower_step_index(
        self, store: Any
    ) -> None:
        # SPEC R9.4: a sub-agent that starts fresh overwrites its old checkpoint from 1.
        await self.save(store, make_checkpoint("run-restart", 4, status="completed"))
        await self.save(store, make_checkpoint("run-restart", 1))
        loaded = await self.load(store, "run-restart")
        assert loaded is not None
        assert loaded.to_json() == make_checkpoint("run-restart", 1).to_json()

    async def test_a_status_change_is_saved(self, store: Any) -> None:
        # SPEC R6.4: running, then suspended, then completed under one run id.
        statuses: tuple[CheckpointStatus, ...] = ("running", "suspended", "completed")
        for step, status in enumerate(statuses, start=1):
            await self.save(store, make_checkpoint("run-status", step, status=status))
            loaded = await self.load(store, "run-status")
            assert loaded is not None
            assert (loaded.status, loaded.step_index) == (status, step)

    async def test_an_unknown_run_id_loads_none(self, store: Any) -> None:
        # SPEC R6.1
        assert await self.load(store, "no-such-run") is None

    async def test_runs_are_independent(self, store: Any) -> None:
        await self.save(store, make_checkpoint("run-a", 1))
        await self.save(store, make_checkpoint("run-b", 1))
        await self.save(store, make_checkpoint("run-a", 2))
        a = await self.load(store, "run-a")
        b = await self.load(store, "run-b")
        assert a is not None
        assert b is not None
        assert a.to_json() == make_checkpoint("run-a", 2).to_json()
        assert b.to_json() == make_checkpoint("run-b", 1).to_json()

    async def test_sub_agent_keys_are_ordinary_run_ids(self, store: Any) -> None:
        # SPEC R9.3: child keys nest ``::`` and ``#``; a prefix is a different run.
        keys = ("root", "root::researcher#c1", "root::researcher#c1::coder#c2")
        for depth, key in enumerate(keys, start=1):
            await self.save(store, make_checkpoint(key, depth))
        for depth, key in enumerate(keys, start=1):
            loaded = await self.load(store, key)
            assert loaded is not None
            assert loaded.to_json() == make_checkpoint(key, depth).to_json()

    # -- delete and list ----------------------------------------------------------------

    async def test_delete_removes_the_run(self, store: Any) -> None:
        await self.save(store, make_checkpoint("run-gone", 1))
        await self.save(store, make_checkpoint("run-kept", 1))
        await self.delete(store, "run-gone")
        assert await self.load(store, "run-gone") is None
        assert await self.load(store, "run-kept") is not None
        assert await self.list_runs(store) == ["run-kept"]

    async def test_deleting_an_unknown_run_is_a_no_op(self, store: Any) -> None:
        await self.save(store, make_checkpoint("run-kept", 1))
        await self.delete(store, "no-such-run")
        assert await self.load(store, "run-kept") is not None
        assert await self.list_runs(store) == ["run-kept"]

    async def test_a_deleted_run_can_be_saved_again(self, store: Any) -> None:
        await self.save(store, make_checkpoint("run-again", 3))
        await self.delete(store, "run-again")
        await self.assert_round_trips(store, make_checkpoint("run-again", 1))

    async def test_list_of_an_empty_store_is_empty(self, store: Any) -> None:
        assert await self.list_runs(store) == []

    async def test_list_enumerates_each_saved_run_id_once(self, store: Any) -> None:
        for run_id, steps in (("run-x", 3), ("run-y", 1), ("run-z::w#c1", 2)):
            for step in range(1, steps + 1):
                await self.save(store, make_checkpoint(run_id, step))
        assert sorted(await self.list_runs(store)) == ["run-x", "run-y", "run-z::w#c1"]

    # -- what a checkpoint holds --------------------------------------------------------

    async def test_bytes_and_every_part_type_round_trip(self, store: Any) -> None:
        # SPEC R8.1, R8.2: bytes in images, tool inputs and tool results come back as bytes.
        checkpoint = make_checkpoint("run-bytes", 7, messages=rich_history())
        await self.assert_round_trips(store, checkpoint)
        loaded = await self.load(store, "run-bytes")
        assert loaded is not None
        image = loaded.messages[1].parts[1]
        assert isinstance(image, ImagePart)
        assert image.image == PNG
        assert isinstance(image.image, bytes)
        result = loaded.messages[3].parts[0]
        assert isinstance(result, ToolResultPart)
        assert result.result["nested"] == [[b"\x7f"], {"empty": b""}]

    async def test_nul_and_lone_surrogates_in_text_round_trip(self, store: Any) -> None:
        # SPEC R8.1: any Python string a tool may return is storable, not only valid UTF-8.
        text = "a\x00b \ud83d half an emoji, \udc00 a stray low half"
        history = (
            Message("user", text),
            Message("tool", (ToolResultPart("toolu_1", {text: [text]}),)),
        )
        await self.assert_round_trips(
            store, make_checkpoint("run-odd-text", messages=history)
        )

    async def test_pending_approvals_with_tokens_and_agent_paths_round_trip(
        self, store: Any
    ) -> None:
        # SPEC R6.3, R9.3: a suspended (sub-agent) checkpoint keeps its signed requests.
        checkpoint = make_checkpoint(
            "root::researcher#c1",
            2,
            status="suspended",
            messages=rich_history()[:3],
            pending_approvals=signed_requests("root"),
            agent_path=("researcher",),
            usage=Usage(
                input_tokens=120,
                output_tokens=30,
                reasoning_tokens=7,
                cached_read_tokens=64,
                cache_write_tokens=16,
                cache_write_1h_tokens=8,
                total_tokens=150,
                audio_tokens=0,
                server_tool_uses=2,
            ),
        )
        await self.assert_round_trips(store, checkpoint)
        loaded = await self.load(store, "root::researcher#c1")
        assert loaded is not None
        assert loaded.pending_approvals is not None
        verifier = create_approval_signer(secret="contract-secret", clock=FixedClock())
        for request in loaded.pending_approvals:
            payload = verifier.verify(request.token)
            assert payload is not None
            assert payload["approvalId"] == request.approval_id
            assert payload["runId"] == "root"

    async def test_a_loaded_checkpoint_is_not_changed_by_later_saves(
        self, store: Any
    ) -> None:
        # SPEC R8.5: history is immutable; a snapshot is a snapshot.
        first = make_checkpoint("run-snap", 1, messages=rich_history()[:3])
        first_json = first.to_json()
        await self.save(store, first)
        loaded = await self.load(store, "run-snap")
        assert loaded is not None
        longer = (*loaded.messages, *rich_history()[3:])
        await self.save(store, make_checkpoint("run-snap", 2, messages=longer))
        await self.save(store, make_checkpoint("run-other", 1, messages=longer))
        assert first.to_json() == first_json
        assert loaded.to_json() == first_json

    # -- through the loop ---------------------------------------------------------------

    @staticmethod
    def booking_run(executed: list[str]) -> dict[str, Any]:
        """The loop arguments of a two-leg run: a forecast, then a train booking a
        person approves, then the answer; ``executed`` logs each tool's execution."""

        @tool
        async def forecast(city: str) -> dict[str, Any]:
            """Tomorrow's weather."""
            executed.append(f"forecast:{city}")
            return {"city": city, "sky": "☀️", "high": 21.5}

        @tool(needs_approval=True)
        async def book_train(city: str) -> str:
            """Book a seat (a person approves it first)."""
            executed.append(f"book_train:{city}")
            return f"Booked to {city}."

        model = ScriptedModel(
            [
                reply(
                    tool_calls=[("toolu_1", "forecast", {"city": "Zürich"})],
                    usage=(10, 5),
                ),
                reply(
                    tool_calls=[("toolu_2", "book_train", {"city": "Zürich"})],
                    usage=(20, 7),
                ),
                reply(text="Booked: sunny Zürich awaits.", usage=(30, 9)),
            ]
        )
        clock = FixedClock()
        return {
            "model": model,
            "tools": [forecast, book_train],
            "max_steps": 8,
            "approval_signer": create_approval_signer(
                secret="contract-secret", clock=clock
            ),
            "deps": Deps(clock=clock, generate_id=lambda: "unused-id"),
        }

    @staticmethod
    async def start_booking(store: Any, run: dict[str, Any]) -> GenerateTextResult:
        """The booking run's first leg, in ``store``: it suspends on the booking."""
        return await generate_text(
            prompt="Check Zürich and book a train.",
            session=DurableSession(store, "run-e2e"),
            **run,
        )

    @staticmethod
    async def approve_booking(
        store: Any, run: dict[str, Any], first: GenerateTextResult
    ) -> GenerateTextResult:
        """The booking run's second leg: the booking approved with its token."""
        assert first.pending_approvals is not None
        (pending,) = first.pending_approvals
        verdict = {
            "approvalId": pending.approval_id,
            "approved": True,
            "token": pending.token,
        }
        return await resume_from_checkpoint(
            store, "run-e2e", approval_responses=[verdict], **run
        )

    async def test_a_gated_call_saves_the_durable_run_suspended(
        self, store: Any
    ) -> None:
        # SPEC R6.4 (B1, B7), R6.6, R10.8 against this store.
        executed: list[str] = []
        first = await self.start_booking(store, self.booking_run(executed))
        assert first.run_id == "run-e2e"
        assert executed == ["forecast:Zürich"]
        assert first.pending_approvals is not None
        assert len(first.pending_approvals) == 1
        suspended = await self.load(store, "run-e2e")
        assert suspended is not None
        assert (suspended.status, suspended.step_index) == ("suspended", 2)
        assert suspended.step_id == "run-e2e#2"
        assert suspended.pending_approvals == first.pending_approvals
        assert suspended.messages == first.messages
        assert suspended.usage.total_tokens == 42
        assert suspended.created_at == FixedClock().now()

    async def test_an_approved_resume_saves_the_run_completed(self, store: Any) -> None:
        # SPEC R6.4 (B4), R6.6, R6.7, R7.2, R10.9 against this store.
        executed: list[str] = []
        run = self.booking_run(executed)
        resumed = await self.approve_booking(
            store, run, await self.start_booking(store, run)
        )
        assert executed == ["forecast:Zürich", "book_train:Zürich"]
        assert resumed.run_id == "run-e2e"
        assert resumed.text == "Booked: sunny Zürich awaits."
        assert resumed.usage.total_tokens == 39  # this leg only (R6.7)
        final = await self.load(store, "run-e2e")
        assert final is not None
        assert (final.status, final.step_index) == ("completed", 3)
        assert final.pending_approvals is None
        assert (
            final.usage.to_json()
            == Usage(input_tokens=60, output_tokens=21, total_tokens=81).to_json()
        )
        assert final.messages == resumed.messages
        assert [m.role for m in final.messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        assert final.messages[4].parts == (
            ToolResultPart("toolu_2", "Booked to Zürich."),
        )

    async def test_resuming_leaves_the_suspended_snapshot_untouched(
        self, store: Any
    ) -> None:
        # SPEC R8.5: the leg that continues a run never changes the checkpoint it read.
        run = self.booking_run([])
        first = await self.start_booking(store, run)
        suspended = await self.load(store, "run-e2e")
        assert suspended is not None
        suspended_json = suspended.to_json()
        await self.approve_booking(store, run, first)
        final = await self.load(store, "run-e2e")
        assert final is not None
        assert suspended.to_json() == suspended_json
        assert final.messages[: len(suspended.messages)] == suspended.messages

    async def test_resuming_an_unknown_run_raises_checkpoint_not_found(
        self, store: Any
    ) -> None:
        # SPEC R7.2, R7.3
        with pytest.raises(CheckpointNotFoundError) as caught:
            await resume_from_checkpoint(
                store, "no-such-run", model=ScriptedModel([]), tools=[]
            )
        assert caught.value.run_id == "no-such-run"
