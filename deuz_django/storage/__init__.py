"""What a run keeps, below every rule about approvals: the lease (:mod:`.leases`), the
checkpoint store (:mod:`.store`, written in one round trip by :mod:`.writes`), the step
journal (:mod:`.step_journal`: a turn, each call's start and outcome), the stream journal
(:mod:`.stream_journal`: every part, at a gapless ``seq``) and the transactions they run
in (:mod:`.db`).

Public through settings: ``DEUZ["STREAM_JOURNAL"]`` names
``deuz_django.storage.stream_journal.DatabaseJournal`` or ``...RedisJournal``.
"""
