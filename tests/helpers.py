"""Helpers shared by the integration tests (tests/) and the checkout's module tests.

``run_module`` (a module run as Ansible runs it on a target), the collection's paths and ``load_manifest`` have
one home, the collection's own unit-test harness (tests/unit/utils/harness.py in the collection, which needs no
checkout); they are re-exported here.  What is left here needs this checkout: its fixtures, the test bed,
molecule's fake nvidia-smi.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Importable outside pytest too (scripts/test's prefetch, bench/), where pyproject's pythonpath is not applied.
if os.path.join(REPO, "collections") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import (  # noqa: E402,F401 (re-exported)
    COLLECTION, COLLECTIONS, MANIFEST_DIR, MODULES, load_manifest, run_module, shared_manifest)

# How Ansible reaches a test-bed container: the podman connection, pipelined (tests/plugins/connection).
CONNECTION = "testbed_podman"
CONNECTION_PLUGINS = os.path.join(REPO, "tests", "plugins", "connection")


BAD_INPUTS = os.path.join(REPO, "docs", "bad-inputs.md")


def bad_input_rows():
    """The variable rows of docs/bad-inputs.md, in order: id -> (variable, value, message), with <checkout> and
    <collection> filled in and a table's escaped bar (\\|) read as |. The one reader of that table."""
    rows = {}
    with open(BAD_INPUTS) as handle:
        for line in handle:
            match = re.match(r"^\| ([A-Z]\d\d) \| `([^`]+)` \| `(.+)` \| (.+) \|$", line.rstrip("\n"))
            if match:
                row_id, name, value, message = match.groups()
                for mark, path in (("<checkout>", REPO), ("<collection>", COLLECTION)):
                    value, message = value.replace(mark, path), message.replace(mark, path)
                rows[row_id] = (name, json.loads(value), message.replace("\\|", "|"))
    return rows


SMI = os.path.join(REPO, "molecule", "shared", "files", "fake-nvidia-smi")
# The GPUs of the fleet tests' stand-in hosts, in nvidia-smi's field names (fake_smi's ``gpu``).
GB10 = {"name": "NVIDIA GB10", "compute_cap": "12.1", "driver_version": "580.95.05", "memory.total": None}
GH200 = {"name": "NVIDIA GH200 480GB", "compute_cap": "9.0", "driver_version": "580.95.05", "memory.total": 97871}


def fake_smi(dest, host, gpu, python=None, seen_at=None):
    """A fake nvidia-smi for one inventory host reporting ``gpu`` (nvidia-smi's field names), written
    into ``dest``; returns its path.  For a local host (this machine) it runs with this Python; for a
    container that mounts ``dest`` at ``seen_at``, pass the container's ``python``, and the path
    returned is the one the container sees."""
    profile = os.path.join(dest, "fake-gpus-%s.json" % host)
    gpu = dict(gpu, uuid="GPU-%s" % host, **{"pci.bus_id": "00000000:01:00.0"})
    with open(profile, "w") as handle:
        json.dump({"gpus": [gpu], "cuda_version": "13.0"}, handle)
    inside = seen_at or dest
    with open(SMI) as handle:
        text = handle.read().replace('PROFILE = "/etc/sparkforge/fake-gpus.json"',
                                     "PROFILE = %r" % os.path.join(inside, os.path.basename(profile)))
    path = os.path.join(dest, "nvidia-smi-%s" % host)
    with open(path, "w") as handle:
        handle.write(text.replace("#!/usr/bin/env python3", "#!%s" % (python or sys.executable), 1))
    os.chmod(path, 0o755)
    return os.path.join(inside, os.path.basename(path))


# `wheel` for build venvs (setuptools comes with a Python 3.11 venv), pinned as molecule's pytorch and
# fleet scenarios pin it; downloaded once into the cache and checked.
WHEEL = "wheel-0.45.1-py3-none-any.whl"
WHEEL_SHA256 = "708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248"
WHEEL_CACHE = os.path.expanduser("~/.cache/sparkforge/fleet-molecule")


def pinned_wheel():
    """The path of the pinned `wheel` wheel in the cache (downloaded from the package index once)."""
    cached = os.path.join(WHEEL_CACHE, WHEEL)
    if not os.path.exists(cached):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                        "--only-binary=:all:", "-d", WHEEL_CACHE, "wheel==0.45.1"], check=True)
    with open(cached, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == WHEEL_SHA256, "%s is not the pinned wheel" % cached
    return cached


# The test bed's amd64 image (molecule/shared/build-images.sh) and how its hosts run here: runc (crun
# fails on this cgroup setup) and the sandbox's ulimits, as .config/molecule/config.yml starts them.
IMAGE_AMD64 = "localhost/sparkforge-bookworm:amd64"
PODMAN_RUN = ["podman", "run", "-d", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
              "--ulimit", "nproc=1000:1000"]


def image_present(image=IMAGE_AMD64):
    """Whether podman is installed and holds ``image``."""
    return shutil.which("podman") is not None and subprocess.run(
        ["podman", "image", "exists", image], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def start_container(name, network="host", volumes=(), image=IMAGE_AMD64, arch="amd64"):
    """Start a test-bed host ``name`` that sleeps until removed; ``volumes`` are podman -v specs; ``network`` one
    podman --network spec, or a list of them (one interface per network, the first one's route the default)."""
    cmd = PODMAN_RUN + ["--name", name, "--arch", arch]
    for spec in [network] if isinstance(network, str) else network:
        cmd += ["--network", spec]
    for volume in volumes:
        cmd += ["-v", volume]
    subprocess.run(cmd + [image, "sleep", "infinity"], check=True, stdout=subprocess.DEVNULL, timeout=300)


def remove_containers(names):
    for name in names:
        subprocess.run(["podman", "rm", "-f", "-t", "0", name], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=300)


def user_checkout(root):
    """A stand-in for the checkout of the README and the guides, where its commands run as written: this repository's
    playbooks, collections, library and ansible.cfg (links), ``.venv`` this Python's environment, and an
    empty ``inventory/`` for the test's inventory files.  Returns its path."""
    checkout = os.path.join(str(root), "checkout")
    os.makedirs(os.path.join(checkout, "inventory"))
    for name in ("playbooks", "collections", "library", "ansible.cfg"):
        os.symlink(os.path.join(REPO, name), os.path.join(checkout, name))
    os.symlink(sys.prefix, os.path.join(checkout, ".venv"))
    return checkout


def user_env(checkout):
    """A user's shell in ``checkout``: its venv first on PATH, its own ansible.cfg (found there, as a user's
    is), the sparkforge CLI working on it (SPARKFORGE_HOME)."""
    env = dict(os.environ, PATH=os.path.join(sys.prefix, "bin") + os.pathsep + os.environ["PATH"],
               SPARKFORGE_HOME=checkout, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.pop("ANSIBLE_CONFIG", None)
    return env


def user_shell(checkout, line, timeout=900):
    """Run one line of the README or a guide with bash in ``checkout``, as a user would; stdout and stderr together."""
    return subprocess.run(["bash", "-c", line], cwd=checkout, env=user_env(checkout), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)


def setup_keeps(venv):
    """None when `scripts/setup run` (what scripts/spark runs first) leaves ``venv`` as it is, else why it
    would build it again: a test must never let it rebuild the venv the tests run in. scripts/setup's own
    test: the stamp it wrote, the sha256 of pyproject.toml followed by the extras ("" or "[test]") and a
    newline, 16 hex digits."""
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = handle.read()
    stamps = [hashlib.sha256(project + extra + b"\n").hexdigest()[:16] for extra in (b"", b"[test]")]
    try:
        with open(os.path.join(venv, ".sparkforge-stamp")) as handle:
            have = handle.read().strip()
    except OSError:
        have = None
    if not os.access(os.path.join(venv, "bin", "python"), os.X_OK) or have not in stamps:
        return ("%s is not the venv scripts/setup made from this pyproject.toml (stamp %s): run scripts/setup test"
                % (venv, have))
    return None


def cudaext_entry(optional, cuda_home):
    """The fixture sdist tests/fixtures/ml_packages/cudaext as a matrix entry in the manifest's gpu_build form:
    its force-build flag, TORCH_CUDA_ARCH_LIST, and the fix that removes its hard-coded -gencode pairs (2 in the
    fixture, 9 in causal-conv1d 1.7.0)."""
    return {
        "optional": optional, "needs_torch": False, "methods": [{"method": "source"}],
        "source": {"build_isolation": False, "env": {"CUDA_HOME": cuda_home}},
        "gpu_build": {
            "arch_env": [{"name": "TORCH_CUDA_ARCH_LIST", "form": "torch"}],
            "force_build": {"SPARKFORGE_CUDAEXT_FORCE_BUILD": "TRUE"},
            "jobs_env": "MAX_JOBS", "threads_env": None, "nvcc_threads": 4, "job_memory_gib": 4,
            "fixes": [{"file": "setup.py",
                       "pattern": (r'cc_flag\.append\("-gencode"\)\n\s*'
                                   r'cc_flag\.append\("arch=compute_\d+,code=sm_\d+"\)'),
                       "replace": "pass", "count": 2, "why": "hard-coded -gencode pairs"}],
            "checked": ["tests/fixtures/ml_packages/cudaext/setup.py"],
        },
    }


def copy_venv(template, path):
    """A copy of the venv ``template`` at ``path``, its own: the scripts and pyvenv.cfg that name the template's
    path name ``path`` (bin/python is a link to the base interpreter, so the copy's sys.prefix is ``path``).
    Returns the copy's python."""
    subprocess.run(["cp", "-a", template, path], check=True)
    for name in os.listdir(os.path.join(path, "bin")) + ["../pyvenv.cfg"]:
        full = os.path.join(path, "bin", name)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        with open(full, "rb") as handle:
            data = handle.read()
        if template.encode() in data:
            with open(full, "wb") as handle:
                handle.write(data.replace(template.encode(), path.encode()))
    return os.path.join(path, "bin", "python")


def venv_template(top, name, make):
    """The venv ``top``/``name``, made once by ``make(path)`` and then kept: a venv and a pip install cost seconds
    of CPU each, so a module makes its venv once and each test works on its own copy (copy_venv)."""
    path = os.path.join(top, name)
    if not os.path.isfile(path + ".made"):
        shutil.rmtree(path, ignore_errors=True)  # a make that failed part way
        make(path)
        open(path + ".made", "w").close()
    return path
