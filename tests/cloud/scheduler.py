#!/usr/bin/env python3
"""nova-scheduler, timing each select_destinations call and saying
whether each compute's instance sync left the scheduler's view current.

Run with the cloud venv's python (cloud.py does), with nova-scheduler's
arguments. Logs at INFO, where Nova itself logs nothing:
- `select_destinations: N instances in S s` (logger nova.scheduler.manager)
  after every call, so that a run can set the scheduler's time against the
  Placement service behind it;
- `instance sync for host 'H': current|stale` (nova.scheduler.host_manager)
  after every periodic sync from a compute; flows.py waits for `current`
  from every host before the anti-affinity phase (why: its phase_groups).
"""
import sys
import time

# First, as in nova-scheduler: it chooses the concurrency model.
from nova.cmd import scheduler
from nova.scheduler import host_manager, manager  # noqa: E402


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

    sync = host_manager.HostManager.sync_instance_info

    def reported_sync_instance_info(self, context, host_name, instance_uuids):
        sync(self, context, host_name, instance_uuids)
        current = (self._instance_info.get(host_name) or {}).get('updated')
        host_manager.LOG.info("instance sync for host '%s': %s", host_name, 'current' if current else 'stale')

    host_manager.HostManager.sync_instance_info = reported_sync_instance_info
    sys.exit(scheduler.main())


if __name__ == '__main__':
    main()
