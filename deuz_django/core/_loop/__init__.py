"""The agentic tool loop, private to the core (SPEC §3–§6, §9, §10.3).

``generate_text``, ``stream_chat``, the resume entry points and ``agent_tool`` all run
:class:`~.engine.LoopRun`; nothing here is public API. One module per concern:

- ``options``: the call options, declared and validated once; what ``prepare_step`` sees
  and may return.
- ``engine``: one leg of a run — settle, then step until the leg ends or suspends.
- ``turn``: one model call collected into an assistant message and its tool calls.
- ``leg``: what a leg has produced so far (history, steps, usage, outcome).
- ``approval``: which calls are gated, server-mode decisions, signing requests.
- ``settle``: the verdicts of a resume applied to the trailing unanswered calls.
- ``execution``: one batch of tool calls (concurrency, outcomes, timeouts, calls in
  doubt).
- ``batch_stream``: the parts a batch streams, in order, with what its calls emit.
- ``limits``: when a leg stops on its own (runaway guard, stop conditions, price meter).
- ``abortable``: where a leg stops for the caller's abort.
"""
