"""A run moving on, leg by leg.

- :mod:`.continuing` — the one way a run continues, a verb per act: ``enqueue_run``
  (in the background), ``astart_here`` (a task of this loop), ``arun_here`` (here, to
  the leg's end); ``join_handed_off`` for tests;
- :mod:`.claims` (the claim every continuation makes), :mod:`.legs` (one leg under its
  lease), :mod:`.handed_off` (the legs handed to this process), :mod:`.tasks` (a leg
  through ``django.tasks``: the task path ``deuz_django.runs.tasks.run_claimed_leg_task``
  is stored in queues and stays);
- :mod:`.recovery` (the sweeper; ``recover_runs_task`` for a scheduler of your own),
  :mod:`.draining` (SIGTERM), :mod:`.stopping` (a person's stop), :mod:`.limits`
  (run-wide budgets), :mod:`.forking` (a new run from a step of another),
  :mod:`.threads`, :mod:`.transcript`.

Your code calls :mod:`deuz_django.services`, which re-exports the continuing verbs.
"""
