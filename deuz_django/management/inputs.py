"""``deuz input RUN_ID TEXT (--as USERNAME | --operator NAME) [--input-id ID]``: steer a
run from a shell, through the one service every surface uses
(:func:`deuz_django.services.send_input`)."""

from __future__ import annotations

from typing import Any, Protocol

from django.core.management.base import CommandError, OutputWrapper

from .. import services
from ..core.exceptions import InvalidInputError
from ..exceptions import NotPermitted, RunNotSteerable
from .deciders import ShellDecider
from .output import BAD_ARGUMENTS, NOT_PERMITTED, RUN_ERROR


class _Command(Protocol):
    stdout: OutputWrapper


class InputAction:
    """The ``input`` action of the ``deuz`` command."""

    def handle_input(
        self: _Command,
        *,
        run_id: str,
        text: str,
        input_id: str | None,
        as_user: str | None,
        operator: str | None,
        **options: Any,
    ) -> None:
        sender = ShellDecider.named(
            as_user=as_user,
            operator=operator,
            recorded="recorded as who sent the input",
        )
        try:
            queued = services.send_input(
                run_id,
                text,
                user=sender.user,
                operator=sender.operator,
                input_id=input_id,
            )
        except NotPermitted as error:
            raise CommandError(
                f"{as_user} may not send input to run '{run_id}': {error}",
                returncode=NOT_PERMITTED,
            ) from None
        except RunNotSteerable as error:
            raise CommandError(str(error), returncode=RUN_ERROR) from None
        except InvalidInputError as error:
            raise CommandError(str(error), returncode=BAD_ARGUMENTS) from None
        self.stdout.write(
            f"Run {run_id}: input {queued.seq} queued ({queued.input_id}); it is "
            "delivered at the run's next step boundary"
        )
