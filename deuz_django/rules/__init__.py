"""Decisions nobody has to make each time: standing rules (staff's "always approve refunds
up to $20", :mod:`.conditions` says when one applies) and grants ("approve and allow for
this chat"), applied as a run suspends (:mod:`.automatic`, :mod:`.grants`). The rows are
:class:`deuz_django.models.StandingRule` and :class:`deuz_django.models.Grant`.

Internal: rules and grants are made in the admin, the chat and the API.
"""
