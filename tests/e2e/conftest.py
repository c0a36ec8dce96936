"""Fixtures shared by the end-to-end tests."""

import pytest

from xhost_hosts import Unavailable, ensure_torch


@pytest.fixture(scope="module")
def torch_dir():
    """Real CPU torch for the cross-host container hosts' Python 3.11 (xhost_hosts.ensure_torch); skipped without it."""
    try:
        return ensure_torch()
    except Unavailable as exc:
        pytest.skip(str(exc))
