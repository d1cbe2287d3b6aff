"""Fixes for three defects of openstack-placement 16.0.0's
GET /allocation_candidates, applied in-process by `serve.py
--fix-upstream-defects`: the fixed reference is the oracle of
tests/integration/test_candidates_differential.py for the request shapes
the defects affect (see that test's docstring and `Case.reference_defects`).

- 'consolidation': when a class is requested by two or more groups and
  group_policy is isolate or absent, consolidating a candidate adds amounts
  into request objects other candidates share (the answer then depends on
  the hash seed and holds inflated amounts). Fixed: every consolidation
  works on a copy.
- 'anchors': the unsuffixed group's allocation requests of all anchors are
  gathered in one set, and AllocationRequest equality ignores the anchor,
  so a request made only of sharing providers survives under one anchor
  only. Fixed: they are kept in a list, one per anchor.
- 'forbidden-names': the tree search is handed the forbidden traits' name
  -> id map where a list of ids belongs, so SQL compares trait names with
  integer ids. MariaDB and SQLite find no match (the traits are checked
  again later, so the answer stands); PostgreSQL refuses the statement and
  the request fails with a 500. Fixed: the ids are passed.
"""
import copy
import inspect

from placement.objects import allocation_candidate, research_context

# (text in upstream's _alloc_candidates_multiple_providers, replacement)
_ANCHOR_EDITS = (
    ('alloc_requests = set()', 'alloc_requests = []'),
    ('alloc_requests |= root_alloc_reqs', 'alloc_requests.extend(root_alloc_reqs)'),
)


class UpstreamChanged(Exception):
    """The installed placement is not the one these fixes were written for."""


def _always_copy(self, arr):
    return copy.copy(arr)


def _keep_one_request_per_anchor():
    source = inspect.getsource(allocation_candidate._alloc_candidates_multiple_providers)
    for old, new in _ANCHOR_EDITS:
        if old not in source:
            raise UpstreamChanged('allocation_candidate no longer has %r' % old)
        source = source.replace(old, new)
    # Recompiled in the module's own namespace, so the function keeps
    # resolving the module's helpers, and callers pick up the new one.
    exec(compile(source, allocation_candidate.__file__, 'exec'), allocation_candidate.__dict__)


def _pass_forbidden_trait_ids():
    upstream = research_context._get_trees_with_traits

    def trees_with_traits(ctx, rp_ids, required_traits, forbidden_traits):
        if isinstance(forbidden_traits, dict):
            forbidden_traits = list(forbidden_traits.values())
        return upstream(ctx, rp_ids, required_traits, forbidden_traits)

    research_context._get_trees_with_traits = trees_with_traits


def apply():
    research_context.RequestWideSearchContext.copy_arr_if_needed = _always_copy
    _keep_one_request_per_anchor()
    _pass_forbidden_trait_ids()
