"""Transitional: ``deuz_django.verdicts`` still imports the token check from here.

The loop's approval code lives in :mod:`._loop.approval`; this module goes once the Django
side calls the public check instead.
"""

from ._loop.approval import token_authorizes

__all__ = ["token_authorizes"]
