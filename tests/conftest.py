"""Suite-wide collection order: modules with a `slow` test run first.

`make test` spreads the suite over two workers a file at a time (pytest-xdist,
`--dist loadfile --no-loadscope-reorder`), handing files out in collection order (without
the flag xdist hands out the files with the most tests first). A two-minute file
collected last would leave one worker running it alone at the end; started first, it
overlaps with everything else.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    # A stable sort keeps every file's own order and the order of files within each group.
    items.sort(key=lambda item: item.path not in slow_files)
