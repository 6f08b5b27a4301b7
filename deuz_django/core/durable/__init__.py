"""Durable execution: checkpoints at every step boundary, resume, the codec and the signer.

>>> store = create_in_memory_session_store()
>>> result = await generate_text(..., session=DurableSession(store=store, run_id="run-42"))
>>> resumed = await resume_from_checkpoint(store, "run-42", model=model, tools=tools,
...     approval_responses=[{"approval_id": "toolu_abc", "approved": True, "token": token}])
>>> forked = await fork_from_checkpoint(store, "run-42", step_index=1,
...     edit=ForkEdit(message="Ask it differently."))

What people say to a run while it runs or waits goes through the store's input queue
(:mod:`.inputs`): ``InMemorySessionStore(input_queue=InMemoryInputQueue())``.
"""

from ..exceptions import (
    CheckpointNotFoundError,
    InputArrived,
    InvalidForkError,
    RunCompletedError,
    RunExistsError,
    UnauthorizedExecution,
)
from .checkpoint import CHECKPOINT_VERSION, AgentCheckpoint, CheckpointStatus
from .codec import deserialize_checkpoint, serialize_checkpoint
from .forking import (
    ForkEdit,
    ForkedRun,
    ForkingStore,
    ForkSource,
    fork_from_checkpoint,
    plan_fork,
)
from .inputs import InMemoryInputQueue, InputQueue, QueuedInput
from .memory import InMemorySessionStore, create_in_memory_session_store
from .resume import resume_from_checkpoint, resume_stream_from_checkpoint
from .run_ids import (
    child_run_id,
    child_run_id_prefix,
    is_child_run_id,
    parent_run_id,
    root_run_id,
)
from .session import DurableSession, SessionStore
from .signer import ApprovalSigner, TokenProblem, create_approval_signer, token_problem
from .step_journal import (
    Authorization,
    CallRecord,
    InMemoryStepJournal,
    JournalStep,
    StepJournal,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "AgentCheckpoint",
    "ApprovalSigner",
    "Authorization",
    "CallRecord",
    "CheckpointNotFoundError",
    "CheckpointStatus",
    "DurableSession",
    "ForkEdit",
    "ForkSource",
    "ForkedRun",
    "ForkingStore",
    "InMemoryInputQueue",
    "InMemorySessionStore",
    "InMemoryStepJournal",
    "InputArrived",
    "InputQueue",
    "InvalidForkError",
    "JournalStep",
    "QueuedInput",
    "RunCompletedError",
    "RunExistsError",
    "SessionStore",
    "StepJournal",
    "TokenProblem",
    "UnauthorizedExecution",
    "child_run_id",
    "child_run_id_prefix",
    "create_approval_signer",
    "create_in_memory_session_store",
    "deserialize_checkpoint",
    "fork_from_checkpoint",
    "is_child_run_id",
    "parent_run_id",
    "plan_fork",
    "resume_from_checkpoint",
    "resume_stream_from_checkpoint",
    "root_run_id",
    "serialize_checkpoint",
    "token_problem",
]
