"""The calls a run asks people about, from the ask to the verdict.

- :mod:`.asking` — a suspension's bookkeeping: one approval row per pending call
  (and its deadline, standing rules and grants), in the checkpoint's transaction;
- :mod:`.verdicts` — the check and the write of one verdict (the rules every surface
  obeys; :func:`deuz_django.services.record_verdicts` is the service they call);
- :mod:`.settling` — the rows turned into the responses a run's next leg settles with;
- :mod:`.questions`, :mod:`.tool_versions` — a question's answer, a tool definition's
  fingerprint (what was approved is what runs);
- surfaces that live with the concept: :mod:`.page_verdicts` (deciding on a web page),
  :mod:`.links` and :mod:`.link_views` (mailed action links), :mod:`.chat_view` (the
  calls the chat component may decide).

Internal: use :mod:`deuz_django.services` from your code.
"""
