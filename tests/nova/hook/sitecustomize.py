"""Put on PYTHONPATH by tests/nova/run. With KEELSON_NOVA_PLACEMENT=keelson
it patches upstream's PlacementFixture the moment its module is first
imported (after Nova's eventlet monkey patching, which the test package
does first), so the unmodified test modules get keelson servers. Any other
value leaves the stock in-process Python Placement alone."""

import importlib.abc
import importlib.machinery
import os
import sys

TARGET = 'placement.tests.functional.fixtures.placement'


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            sys.meta_path.remove(self)
            sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            import keelson_placement
            keelson_placement.install()

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get('KEELSON_NOVA_PLACEMENT') == 'keelson':
    sys.meta_path.insert(0, _PatchAfterImport())
