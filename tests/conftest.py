import functools
import os
import re
import sys
import time
import uuid

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
# The tests by kind (tests/integration, tests/e2e, the collection's tests/unit/plugins/modules) import the
# helpers, readme, testbed and fixtures of this folder, and a few import a sibling test's helpers by module
# name (test_check_mode_local's stand-in host, test_pytorch_roles' run_play, test_sources_preflight's checks).
MODULE_TESTS = os.path.join(os.path.dirname(TESTS), "collections", "ansible_collections", "sparkforge", "stack",
                            "tests", "unit", "plugins", "modules")
for place in reversed([TESTS, os.path.join(TESTS, "integration"), os.path.join(TESTS, "e2e"), MODULE_TESTS]):
    if place not in sys.path:
        sys.path.insert(0, place)

# tests/fixtures holds stand-in source trees, some with their own test suites (the PyTorch
# fixture's test/ for the acceptance tests): data for the tests here, not tests to collect.
collect_ignore = ["fixtures"]

# Every process the suite starts inherits this marker (subprocess, ansible-runner, ansible-playbook and
# its workers, the modules they run on this machine); at the end no ansible-playbook may carry it.
SESSION_VAR = "SPARKFORGE_TEST_SESSION"
os.environ.setdefault(SESSION_VAR, uuid.uuid4().hex)
# The test bed's pipelined podman connection (tests/plugins/connection), for every ansible the suite starts.
os.environ.setdefault("ANSIBLE_CONNECTION_PLUGINS", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "plugins", "connection"))
# Module payloads built once for the whole suite, not once per ansible-playbook (tests/plugins/callback/
# ansiballz_shared.py: keyed by every file a payload can hold).
os.environ.setdefault("ANSIBLE_CALLBACK_PLUGINS", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                "plugins", "callback"))
os.environ.setdefault("ANSIBLE_CALLBACKS_ENABLED", "ansiballz_shared")
os.environ.setdefault("SPARKFORGE_TEST_ANSIBALLZ_CACHE", os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), ".cache", "ansiballz"))


@pytest.fixture(scope="session")
def manifest():
    """The version manifest merged once (helpers.shared_manifest), the collection's unit tests' fixture of the
    same name: shared, so a test that changes it works on copy.deepcopy(manifest)."""
    from helpers import shared_manifest
    return shared_manifest()


def suite_playbooks(session=None):
    """(pid, command line) of the live ansible-playbook processes started by this test session."""
    needle = ("%s=%s" % (SESSION_VAR, session or os.environ[SESSION_VAR])).encode()
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            if "ansible-playbook" not in cmdline:
                continue
            with open("/proc/%s/stat" % name) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open("/proc/%s/environ" % name, "rb") as handle:
                if needle not in handle.read().split(b"\0"):
                    continue
        except OSError:
            continue
        found.append((int(name), cmdline))
    return found


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when an ansible-playbook started by the suite outlives it (then end it)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Under xdist (the quick lane) the workers share the session's marker: a worker that ends first would
        # see the other's playbooks; the controller checks once every worker has ended.
        return
    deadline = time.monotonic() + 15  # a run that was just ended may take a moment to go
    left = suite_playbooks()
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = suite_playbooks()
    if not left:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["%d ansible-playbook process(es) started by the tests are still alive:" % len(left)]
    lines += ["  pid %d: %s" % (pid, cmd[:300]) for pid, cmd in left]
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    else:
        sys.stderr.write("\n".join(lines) + "\n")
    import signal
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    session.exitstatus = 1


# The suite's lanes (scripts/test): modules that need the container test bed (tests/testbed.py, podman
# and the images), and the long runs that the quick lane (scripts/test quick) leaves to the full suite.
# A module is the test bed's when its source starts containers (the names below), not by a list: a list
# forgot test_xhost_topologies (eight container hosts, about 330 s), which ran in the quick lane.
# tests/test_lanes.py checks that every helper that starts a container is named here.
STARTS_CONTAINERS = re.compile(r"\b(image_present|start_containers?|start_hosts?|podman_host\.Container|"
                               r"testbed\.(up|restore))\b")
# The test bed's modules the quick lane keeps: the journey's first stages are its check-mode matrix.
QUICK_TESTBED = {"test_journey"}
# test_collection_alone runs the collection's unit tests again, from a copy (about 2.5 minutes here).
FULL = {"test_pytorch_roles", "test_ml_packages_module", "test_reproducible", "test_run_lock_local",
        "test_venv_interrupted", "test_collection_alone"}


@functools.lru_cache(maxsize=None)
def starts_containers(path):
    """Whether the test module at ``path`` starts containers (then it is marked ``testbed``)."""
    with open(path) as handle:
        return STARTS_CONTAINERS.search(handle.read()) is not None


def pytest_collection_modifyitems(config, items):

    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        testbed = starts_containers(item.module.__file__)
        if testbed:
            item.add_marker(pytest.mark.testbed)
        if module in FULL or (testbed and module not in QUICK_TESTBED):
            item.add_marker(pytest.mark.full)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skip is a failure in the full run (SPARKFORGE_SKIPS_FAIL=1: the collection's tests/unit/utils/skips.py)."""
    outcome = yield
    from ansible_collections.sparkforge.stack.tests.unit.utils.skips import skip_as_failure
    skip_as_failure(outcome.get_result())


def pytest_configure(config):
    # Registered here, not in pyproject.toml (an edit there changes the venv's stamp and asks for scripts/setup).
    config.addinivalue_line("markers", "bad_input_rows(*ids): the rows of docs/bad-inputs.md this test runs "
                                       "(tests/test_bad_inputs_doc.py counts a row as run by its id here)")
