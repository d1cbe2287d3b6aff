#!/usr/bin/env python3
"""nova-scheduler, timing each select_destinations call.

Run with the cloud venv's python (cloud.py does), with nova-scheduler's
arguments. Logs `select_destinations: N instances in S s` (INFO, logger
nova.scheduler.manager) after every call, so that a run can set the
scheduler's time against the Placement service behind it; Nova itself
logs nothing at INFO there.
"""
import sys
import time

# First, as in nova-scheduler: it chooses the concurrency model.
from nova.cmd import scheduler
from nova.scheduler import manager  # noqa: E402


def main():
    select = manager.SchedulerManager.select_destinations

    def timed_select_destinations(self, context, *args, **kwargs):
        started = time.monotonic()
        try:
            return select(self, context, *args, **kwargs)
        finally:
            uuids = kwargs.get('instance_uuids') or []
            manager.LOG.info('select_destinations: %d instances in %.3f s', len(uuids), time.monotonic() - started)

    manager.SchedulerManager.select_destinations = timed_select_destinations
    sys.exit(scheduler.main())


if __name__ == '__main__':
    main()
