"""What a test does when something it needs is not there: it fails in CI, where
``scripts/check`` installs everything, and elsewhere skips, printing the reason."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["unavailable"]


def unavailable(reason: str) -> NoReturn:
    """Fail (in CI) or skip (elsewhere, with the reason printed): never pass unseen."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    print(f"skipping: {reason}")
    pytest.skip(reason)
