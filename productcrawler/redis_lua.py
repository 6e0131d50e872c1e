"""The Lua scripts Redis runs, read from the ``.lua`` files in each feature's ``lua/`` folder.

Each feature keeps its scripts beside its code (``ratelimit/lua/``, ``budget/lua/``,
``proxies/lua/``, ``passes/lua/``) and reads them once, at import, with
:func:`lua_script`; a function two scripts share is a file of its own,
joined in front of each. The files ship in the package (``setup.py``'s
``package_data``), so the scrapyd egg and the Docker image hold them.
"""

from __future__ import annotations

from importlib import resources


def lua_script(package: str, *names: str) -> str:
    """The files ``names`` of ``package``'s ``lua/`` folder, joined in order: one script."""
    folder = resources.files(package).joinpath("lua")
    return "".join(folder.joinpath(name).read_text(encoding="utf-8") for name in names)
