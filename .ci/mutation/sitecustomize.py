"""Serves one module's mutant in place of its file, in every Python process.

Active only when MUTANT_MODULE names a module: the mutation runner puts this
directory on PYTHONPATH, so subprocesses (the CLI, a server under test) import
the mutant too, and the checkout's files are never written.
"""

from __future__ import annotations

import os

_MODULE = os.environ.get("MUTANT_MODULE")

if _MODULE:
    import importlib.machinery
    import importlib.util
    import sys

    _ORIGIN = os.environ["MUTANT_ORIGIN"]
    with open(os.environ["MUTANT_SOURCE"], encoding="utf-8") as f:
        _SOURCE = f.read()

    class _Loader(importlib.machinery.SourceFileLoader):
        # Compiled here, never from (or into) the bytecode cache of the original.
        def get_code(self, fullname: str) -> object:
            return compile(_SOURCE, _ORIGIN, "exec", dont_inherit=True)

        def get_source(self, fullname: str) -> str:
            return _SOURCE

    class _Finder:
        @staticmethod
        def find_spec(name: str, path: object = None, target: object = None) -> object:
            if name != _MODULE:
                return None
            package = os.path.basename(_ORIGIN) == "__init__.py"
            return importlib.util.spec_from_file_location(
                name,
                _ORIGIN,
                loader=_Loader(name, _ORIGIN),
                submodule_search_locations=[os.path.dirname(_ORIGIN)] if package else None,
            )

    sys.meta_path.insert(0, _Finder())
