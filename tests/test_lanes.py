"""The suite's lanes (tests/conftest.py): a test module that starts containers is marked ``testbed`` and left out
of the quick lane by what its source calls, not by a list. Here: every helper that starts a container (through
``podman run``, directly or through another helper) is a name that rule knows, so a new container test cannot
land in the quick lane (scripts/test quick, under 10 minutes) by being forgotten, as test_xhost_topologies was."""

import ast
import os
import re

from tests import conftest
from tests.helpers import REPO

# Where the tests' container helpers live.
HELPERS = ["tests/helpers.py", "tests/xhost_hosts.py", "tests/testbed.py", "tests/fixtures/nvidia_repo/podman_host.py"]
PODMAN_RUN = re.compile(r'PODMAN_RUN|_podman\(\s*"run"')


def _definitions():
    """``{(module name, top-level function or class name): its source}`` of the helper files."""
    found = {}
    for path in HELPERS:
        with open(os.path.join(REPO, path)) as handle:
            source = handle.read()
        stem = os.path.splitext(os.path.basename(path))[0]
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found[(stem, node.name)] = ast.get_source_segment(source, node)
    return found


def container_starters():
    """The helpers that start a container: those that run ``podman run``, then those that call one of them."""
    defs = _definitions()
    starters = {key for key, source in defs.items() if PODMAN_RUN.search(source)}
    while True:
        called = re.compile(r"\b(%s)\b" % "|".join(re.escape(name) for _, name in starters))
        more = {key for key, source in defs.items() if key not in starters and called.search(source)}
        if not more:
            return starters
        starters |= more


def test_every_helper_that_starts_a_container_marks_its_callers_testbed():
    starters = container_starters()
    # The rule found the helpers the container tests use (the search itself works).
    assert {("helpers", "start_container"), ("xhost_hosts", "start_hosts"), ("testbed", "up"),
            ("podman_host", "Container")} <= starters
    # `main` is testbed.py's command line, never called by a test.
    public = sorted((stem, name) for stem, name in starters if not name.startswith("_") and name != "main")
    unknown = [(stem, name) for stem, name in public
               if not conftest.STARTS_CONTAINERS.search("%s.%s(" % (stem, name))]
    assert unknown == [], "helpers that start containers but that tests/conftest.py's STARTS_CONTAINERS does not name"


def test_the_container_modules_are_marked_testbed_and_left_out_of_the_quick_lane():
    module_tests = os.path.relpath(conftest.MODULE_TESTS, REPO)
    paths = [os.path.join(root, name) for top in ("tests", module_tests)
             for root, _, names in os.walk(os.path.join(REPO, top)) for name in names
             if name.startswith("test_") and name.endswith(".py")]
    testbed = {os.path.basename(p)[:-3] for p in paths if conftest.starts_containers(p)}
    # test_build_jobs uses podman_host's HTTP server only, no container.
    assert "test_build_jobs" not in testbed
    assert {"test_xhost_topologies", "test_xhost_containers", "test_fleet_rollout", "test_offline_bundle",
            "test_journey", "test_cuda_roles", "test_cuda_cusparselt_repo", "test_api_container"} <= testbed
