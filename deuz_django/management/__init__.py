"""``manage.py deuz`` (:mod:`.commands.deuz`): list, show, resume, stop, recover and prune
runs; who decides from a shell (:mod:`.deciders`) and how it prints (:mod:`.output`)."""
