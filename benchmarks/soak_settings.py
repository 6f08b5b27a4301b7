"""Settings of the soak's processes: the test settings with the soak's agent registered.

Everything else (database, Redis, the worker backend, lease and recovery pace) comes from
the environment the soak starts its daphnes and workers with (tests/settings.py,
example_project/settings.py).
"""

from tests.settings import *  # noqa: F403
from tests.settings import DEUZ

DEUZ = {**DEUZ, "AGENTS": {**DEUZ["AGENTS"], "soak": "benchmarks.soak_agent.support"}}
