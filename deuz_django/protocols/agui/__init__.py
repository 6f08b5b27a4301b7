"""AG-UI 1.0 (the protocol of CopilotKit and other front ends) over our runs: an agent's
endpoint takes a ``RunAgentInput`` and streams its run as AG-UI events over SSE
(:mod:`.views`); our stream parts map to events in :mod:`.events`, pending approvals to
interrupts and a resume's answers to verdicts in :mod:`.interrupts`."""
