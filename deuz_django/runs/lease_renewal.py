"""A leg renews its lease while it runs, so the lease lapses — and recovery continues
the run elsewhere — only once this process stopped; a leg that lost its lease aborts
rather than act without it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from asgiref.sync import sync_to_async

from ..core import AbortController
from ..exceptions import LeaseLost
from ..storage import leases
from ..storage.db import once_more_if_broken
from ..storage.leases import Lease

logger = logging.getLogger("deuz_django")


async def keep_lease(lease: Lease, controller: AbortController) -> None:
    """Renew the lease every third of its length; abort the leg once it was taken over,
    or when renewals kept failing for two thirds of it (before it can lapse)."""
    duration = leases.lease_duration().total_seconds()
    interval = max(0.05, duration / 3)
    renewed = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        try:
            held = await sync_to_async(once_more_if_broken)(lambda: leases.renew(lease))
        except Exception:
            if time.monotonic() - renewed + interval >= duration:
                logger.error(
                    "deuz: the lease on run %s could not be renewed; aborting this leg",
                    lease.run_id,
                    exc_info=True,
                )
                controller.abort(
                    LeaseLost(f"Lease on run '{lease.run_id}' could not be renewed.")
                )
                return
            logger.warning(
                "deuz: renewing the lease on run %s failed; retrying",
                lease.run_id,
                exc_info=True,
            )
            continue
        renewed = time.monotonic()
        if not held:
            logger.error(
                "deuz: lease on run %s was taken over; aborting this leg", lease.run_id
            )
            controller.abort(
                LeaseLost(f"Lease on run '{lease.run_id}' was taken over.")
            )
            return
