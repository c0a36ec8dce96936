"""Runs sparkforge.stack.triton_llvm_build for real on the fixture LLVM and Triton repositories.

tests/fixtures/triton/make_repos.py creates an LLVM-shaped CMake/Ninja project and a Triton-shaped
repository whose setup.py refuses to build unless it is pointed at that LLVM's install prefix with
TRITON_OFFLINE_BUILD=1.  Every build here is real (cmake, ninja, pip wheel, a C extension linked
against the fixture LLVM library); only their size is small.
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

import pytest

from helpers import COLLECTIONS, MODULES, REPO, run_module

FIXTURES = os.path.join(REPO, "tests", "fixtures", "triton")
FIXTURE_PTXAS = os.path.join(FIXTURES, "cuda", "bin", "ptxas")

pytestmark = pytest.mark.skipif(
    any(subprocess.call(["sh", "-c", "command -v %s" % tool], stdout=subprocess.DEVNULL) for tool in
        ("git", "cmake", "ninja", "cc", "c++")),
    reason="needs git, cmake, ninja and a C/C++ compiler")


def _load_make_repos():
    spec = importlib.util.spec_from_file_location("make_repos", os.path.join(FIXTURES, "make_repos.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_repos


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    return _load_make_repos()(str(tmp_path_factory.mktemp("triton-fixture-repos")))


def _build_python(dest):
    """A venv like the stack's: pip + setuptools + wheel (from the system when it has them, else PyPI)."""
    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    subprocess.check_call([base, "-m", "venv", "--system-site-packages", dest])
    python = os.path.join(dest, "bin", "python")
    if subprocess.call([python, "-c", "import setuptools, wheel"], stderr=subprocess.DEVNULL) != 0:
        cache = os.path.join(os.path.expanduser("~"), ".cache", "sparkforge", "pip")
        subprocess.check_call([python, "-m", "pip", "install", "--cache-dir", cache, "setuptools", "wheel"])
    return python


@pytest.fixture(scope="module")
def python(tmp_path_factory):
    return _build_python(str(tmp_path_factory.mktemp("triton-venv") / "venv"))


@pytest.fixture
def args(repos, python, tmp_path):
    return dict(
        triton_repo=repos["triton_repo"], triton_ref="v3.6.0", llvm_repo="file://" + repos["llvm_repo"],
        work_dir=str(tmp_path / "work"), wheel_dir=str(tmp_path / "wheels"), python=python,
        ptxas_path=FIXTURE_PTXAS, jobs="2",
    )


def build(args, **kwargs):
    started = time.time()
    result, rc = run_module("triton_llvm_build", args, **kwargs)
    result["_wall_s"] = time.time() - started
    return result, rc


def ok(args, **kwargs):
    result, rc = build(args, **kwargs)
    assert rc == 0 and not result.get("failed"), json.dumps(result, indent=1)[-4000:]
    return result


def start_module(args, env):
    """The module in the background, in its own session (so the test can kill the whole build)."""
    payload = dict(args, _ansible_check_mode=False, _ansible_diff=False, _ansible_tmpdir=tempfile.gettempdir())
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    handle.close()
    child_env = dict(os.environ, PYTHONPATH=COLLECTIONS, **env)
    return subprocess.Popen([sys.executable, os.path.join(MODULES, "triton_llvm_build.py"), handle.name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, start_new_session=True)


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s" % what)


def status(args):
    try:
        with open(os.path.join(args["work_dir"], "status.json")) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return {}


def wheels_in(wheel_dir):
    return sorted(name for name in os.listdir(wheel_dir) if name.endswith(".whl")) if os.path.isdir(wheel_dir) else []


def build_info(wheel):
    with zipfile.ZipFile(wheel) as archive:
        return json.loads(archive.read("triton/_build_info.json"))


def log_text(args):
    text = ""
    for name in logs(args) if os.path.isdir(os.path.join(args["work_dir"], "logs")) else []:
        with open(os.path.join(args["work_dir"], "logs", name)) as handle:
            text += handle.read()
    return text


def logs(args):
    return sorted(os.listdir(os.path.join(args["work_dir"], "logs")))


def test_first_build_then_noop_rerun(args, repos, python, tmp_path):
    first = ok(args)
    assert first["changed"] is True
    assert first["built"] == ["llvm", "triton"]
    assert first["llvm_commit"] == repos["llvm_commit"]
    assert first["triton_commit"] == repos["triton_refs"]["v3.6.0"]
    assert first["triton_version"] == "3.6.0"
    assert first["llvm_prefix"] == os.path.join(args["work_dir"], "llvm", "llvm-" + repos["llvm_commit"][:12])
    wheel = first["wheel"]
    assert os.path.basename(wheel).startswith("triton-3.6.0-") and wheel.endswith(".whl")
    assert wheels_in(args["wheel_dir"]) == [os.path.basename(wheel)]
    with open(wheel + ".sparkforge.json") as handle:
        record = json.load(handle)
    assert record["cache_key"] == first["cache_key"] and record["sha256"] == first["wheel_sha256"]
    # The wheel was built against the fixture LLVM at the pinned commit, offline, with CUDA 13's ptxas paths.
    info = build_info(wheel)
    assert info["llvm_revision"] == repos["llvm_commit"]
    assert info["llvm_projects"] == "mlir,llvm,lld" and info["llvm_targets"] == "host,NVPTX,AMDGPU"
    assert info["llvm_assertions"] == "ON"
    assert info["ptxas"] == FIXTURE_PTXAS and info["ptxas_blackwell"] == FIXTURE_PTXAS
    assert "libtriton (MAX_JOBS=2)" in log_text(args)
    # ... and its extension really calls into the LLVM library.
    target = str(tmp_path / "site")
    subprocess.check_call([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", target, wheel])
    out = subprocess.check_output([python, "-c", "import triton._C.libtriton as t; print(t.llvm_version(), t.llvm_sum(10))"],
                                  env=dict(os.environ, PYTHONPATH=target), universal_newlines=True)
    assert out.split() == ["17.0.0-fixture", "55"]
    with open(os.path.join(first["llvm_prefix"], ".sparkforge-llvm.json")) as handle:
        assert json.load(handle)["cache_key"] == first["llvm_cache_key"]

    wheel_mtime = os.stat(wheel).st_mtime_ns
    stamp_mtime = os.stat(os.path.join(first["llvm_prefix"], ".sparkforge-llvm.json")).st_mtime_ns
    log_count = len(logs(args))
    second = ok(args)
    assert second["changed"] is False
    assert second["built"] == []
    assert second["wheel"] == wheel and second["wheel_sha256"] == first["wheel_sha256"]
    assert second["cache_key"] == first["cache_key"]
    assert os.stat(wheel).st_mtime_ns == wheel_mtime
    assert os.stat(os.path.join(first["llvm_prefix"], ".sparkforge-llvm.json")).st_mtime_ns == stamp_mtime
    assert len(logs(args)) == log_count
    # Inputs that do not change the wheel do not change the key either.
    third = ok(dict(args, jobs="1", triton_ref=repos["triton_refs"]["v3.6.0"], llvm_repo=repos["llvm_repo"]))
    assert third["changed"] is False and third["cache_key"] == first["cache_key"]
    print("\nTIMING triton_llvm_build on the fixtures: first build %.2f s (module %.2f s), "
          "no-op rerun %.2f s (module %.2f s)" % (first["_wall_s"], first["duration_s"], second["_wall_s"],
                                                  second["duration_s"]))


def test_triton_only_change_reuses_llvm(args, repos):
    first = ok(args)
    stamp = os.path.join(first["llvm_prefix"], ".sparkforge-llvm.json")
    stamp_mtime = os.stat(stamp).st_mtime_ns
    changed = ok(dict(args, triton_ref="triton-only-change"))
    assert changed["changed"] is True and changed["built"] == ["triton"]
    assert changed["llvm_prefix"] == first["llvm_prefix"]
    assert changed["llvm_cache_key"] == first["llvm_cache_key"]
    assert changed["cache_key"] != first["cache_key"]
    assert os.stat(stamp).st_mtime_ns == stamp_mtime
    assert changed["plan"]["llvm"]["build"] is False and "already built" in changed["plan"]["llvm"]["why"]

    # Triton 3.3 keeps setup.py under python/ and has no TRITON_PTXAS_BLACKWELL_PATH; same LLVM pin.
    old = ok(dict(args, triton_ref="v3.3.0"))
    assert old["built"] == ["triton"] and old["triton_version"] == "3.3.0"
    assert old["plan"]["triton"]["setup_dir"] == "python"
    assert os.path.basename(old["wheel"]).startswith("triton-3.3.0-")
    assert build_info(old["wheel"])["ptxas_blackwell"] is None
    # A version that contradicts the tree fails clearly (3.6 wants setup.py at the root).
    bad, rc = build(dict(args, triton_ref="v3.3.0", triton_version="3.6.0"))
    assert rc != 0 and bad["failed"] and "keeps setup.py at the repository root" in bad["msg"]


def test_llvm_hash_change_rebuilds_llvm(args, repos):
    first = ok(args)
    bumped = ok(dict(args, triton_ref="llvm-bump"))
    assert bumped["built"] == ["llvm", "triton"]
    assert bumped["llvm_commit"] == repos["llvm_commit_2"]
    assert bumped["llvm_prefix"] != first["llvm_prefix"] and bumped["llvm_cache_key"] != first["llvm_cache_key"]
    revision = subprocess.check_output([os.path.join(bumped["llvm_prefix"], "bin", "llvm-config"), "--revision"],
                                       universal_newlines=True).strip()
    assert revision == repos["llvm_commit_2"]
    assert build_info(bumped["wheel"])["llvm_revision"] == repos["llvm_commit_2"]
    # The first LLVM is still there for Triton versions that pin it.
    assert os.path.isfile(os.path.join(first["llvm_prefix"], "bin", "llvm-config"))
    # A changed LLVM option is a different LLVM too.
    fewer = ok(dict(args, llvm_targets="host;NVPTX"))
    assert fewer["built"] == ["llvm", "triton"] and fewer["llvm_cache_key"] != first["llvm_cache_key"]


def test_kill_during_llvm_build_then_resume(args):
    proc = start_module(args, {"FIXTURE_LLVM_SLEEP": "60"})
    work = args["work_dir"]

    def built_file(wanted):
        for root, _dirs, files in os.walk(os.path.join(work, "build")):
            if wanted in files:
                return os.path.join(root, wanted)
        return None

    def support_object():
        for root, _dirs, files in os.walk(os.path.join(work, "build")):
            for name in files:
                if name == "Support.c.o":
                    return os.path.join(root, name)
        return None

    try:
        # The fixture's slow step runs once the libraries and llvm-config are built.
        wait_for(lambda: all(built_file(name) for name in ("libLLVMSupport.a", "libLLVMCore.a", "llvm-config")),
                 what="the LLVM libraries to be built")
        time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    obj = support_object()
    obj_mtime = os.stat(obj).st_mtime_ns
    assert wheels_in(args["wheel_dir"]) == []
    resumed = ok(args)
    assert resumed["built"] == ["llvm", "triton"]
    assert os.stat(obj).st_mtime_ns == obj_mtime, "the object built before the kill was compiled again"
    with open(resumed["log"]) as handle:
        text = handle.read()
    assert "phase llvm-configure" not in text, "the kept build tree should not be configured again"
    assert "phase llvm-build" in text


def test_kill_during_triton_build_leaves_no_wheel(args):
    proc = start_module(args, {"FIXTURE_TRITON_SLEEP": "60"})
    try:
        wait_for(lambda: status(args).get("phase") == "triton-wheel", what="the Triton wheel phase")
        time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert wheels_in(args["wheel_dir"]) == []
    resumed = ok(args)
    assert resumed["built"] == ["triton"], "LLVM was finished before the kill and must be reused"
    assert wheels_in(args["wheel_dir"]) == [os.path.basename(resumed["wheel"])]
    with zipfile.ZipFile(resumed["wheel"]) as archive:
        assert archive.testzip() is None


def test_concurrent_run_is_refused(args):
    proc = start_module(args, {"FIXTURE_LLVM_SLEEP": "60"})
    try:
        wait_for(lambda: status(args).get("phase") in ("llvm-build", "llvm-configure", "clone"), what="the build")
        result, rc = build(args)
        assert rc != 0 and result["failed"]
        assert result["phase"] == "lock"
        assert "another build holds the lock" in result["msg"] and "pid %d" % proc.pid in result["msg"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert ok(args)["built"] == ["llvm", "triton"]


def test_check_mode_builds_nothing(args, repos):
    plan = ok(args, check_mode=True)
    assert plan["changed"] is True and plan["built"] == [] and plan["wheel"] is None
    assert plan["plan"]["llvm"]["build"] is True and plan["plan"]["triton"]["build"] is True
    assert plan["llvm_commit"] == repos["llvm_commit"]
    assert not os.path.exists(args["work_dir"]) and not os.path.exists(args["wheel_dir"])
    real = ok(args)
    assert real["cache_key"] == plan["cache_key"] and real["llvm_cache_key"] == plan["llvm_cache_key"]
    again = ok(args, check_mode=True)
    assert again["changed"] is False and again["plan"]["triton"]["build"] is False
    other = ok(dict(args, triton_ref="triton-only-change"), check_mode=True, diff=True)
    assert other["changed"] is True
    assert other["plan"]["llvm"]["build"] is False and other["plan"]["triton"]["build"] is True
    assert other["diff"]["after"].strip().endswith(other["cache_key"])
    assert wheels_in(args["wheel_dir"]) == [os.path.basename(real["wheel"])]


def test_failing_build_reports_phase_and_log_tail(args):
    result, rc = build(args, env={"FIXTURE_TRITON_FAIL": "1"})
    assert rc != 0 and result["failed"]
    assert result["phase"] == "triton-wheel"
    assert "failed on purpose" in result["log_tail"] and "failed on purpose" in result["msg"]
    assert os.path.isfile(result["log"])
    assert status(args)["state"] == "failed" and status(args)["phase"] == "triton-wheel"
    assert wheels_in(args["wheel_dir"]) == []

    other = dict(args, work_dir=args["work_dir"] + "-llvm")
    result, rc = build(other, env={"FIXTURE_LLVM_FAIL": "1"})
    assert rc != 0 and result["phase"] == "llvm-build" and "FIXTURE_LLVM_FAIL" in result["log_tail"]


def test_wrong_llvm_commit_and_tampered_wheel(args, repos):
    bad, rc = build(dict(args, llvm_commit=repos["llvm_commit_2"]))
    assert rc != 0 and bad["phase"] == "plan" and "sparkforge_triton_releases" in bad["msg"]
    first = ok(dict(args, llvm_commit=repos["llvm_commit"]))
    with open(first["wheel"], "ab") as handle:
        handle.write(b"tampered")
    again = ok(args)
    assert again["changed"] is True and again["built"] == ["triton"]
    import hashlib
    with open(again["wheel"], "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == again["wheel_sha256"]
    with zipfile.ZipFile(again["wheel"]) as archive:
        assert archive.testzip() is None
