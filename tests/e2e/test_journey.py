"""A user's first steps, as stages of one journey over the shared test bed (tests/testbed.py).

The README tells a user to try `--check` first, then the real run, then to run it again. Here that is
done for every place torch can come from, on the test bed's air-gapped host (offline-amd64: x86_64, a
fake GB10, no network at all; molecule's scenarios run on the other hosts meanwhile), through
`ansible-playbook playbooks/spark.yml` as a user runs it, with components cuda_libs, cusparselt,
pytorch, torch_domains and runtime_env: the defaults less llvm and triton (their build runs in
molecule's `triton` scenario and the fleet), ml_packages (a real package index: molecule's
`ml_packages`) and verify (it needs a GPU; molecule's `verify_nogpu`); stage 1's `source` run adds llvm,
triton and ml_packages (their check mode on a host with no venv, issue 34). Every source is a stand-in
reached by a file:// URL under the test bed's shared directory: NVIDIA's signed apt repository and the
cuSPARSELt installers (tests/fixtures/nvidia_repo), a PEP 503 index and a wheelhouse of torch 2.10.0
with its domain libraries, the PyTorch/torchvision/torchaudio fixture repositories for a build, the
Triton/LLVM fixture repositories and ptxas (tests/fixtures/triton), and the site's Debian mirror as
a signed flat apt repository of stand-ins of the packages llvm and triton install.

Stages, in order (a stage that needs a fresh host restores the host's snapshot, in about a second):
1. fresh host, `--check --diff`, for torch sources existing, index and source: exit 0 (or,
   for `existing` with no torch to keep, preflight's clean stop), and the host's files unchanged; the
   `source` run with every default component but verify (llvm, triton, ml_packages too: the host has no
   venv), each of llvm, triton and ml_packages reporting the change the real run makes;
2. preflight stop on an unfit host: the same host pointed at PyTorch's real index, which it cannot
   reach, stops before any change, naming the variable to point at a mirror;
3. converge from fresh, torch from the index: the roles check mode said would change are the roles that
   change (the wheelhouse's converge on a container host is molecule's `pytorch` scenario);
4. `--check --diff` on the provisioned host for index, wheelhouse and source: exit 0, nothing changed on the
   host;
5. the real run: changes exactly what check mode said (nothing for index; the build and install for
   source), and `source` again with its wheel now cached predicts and changes nothing. (`existing`'s
   real no-op run is tests/integration/test_result_is_the_plan.py's, on this machine.)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest
import yaml

from helpers import REPO, pinned_wheel
import testbed

sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "nvidia_repo"))
import build_repo  # noqa: E402

pytestmark = [pytest.mark.testbed]

BIN = os.path.dirname(sys.executable)
FIXTURES = os.path.join(REPO, "tests", "fixtures")
WHEELS = os.path.join(FIXTURES, "pytorch", "wheel_index.py")
HOST = "offline-amd64"
# Stage 1 (fresh host) and stage 4 (provisioned): check mode for each place torch can come from, but the
# wheelhouse on a fresh host and `existing` on a provisioned one, which tests/integration/test_check_mode_local.py
# runs on this machine (test_check_mode_reports_the_torch_install_and_changes_nothing[wheelhouse],
# test_check_mode_on_a_provisioned_host_changes_nothing).
FRESH_SOURCES = ("existing", "index", "source")
PROVISIONED_SOURCES = ("index", "wheelhouse", "source")
COMPONENTS = ["cuda_libs", "cusparselt", "pytorch", "torch_domains", "runtime_env"]
# Stage 1's source run: every default component but verify (it needs a GPU).
ALL_BUT_VERIFY = ["cuda_libs", "cusparselt", "llvm", "triton", "pytorch", "torch_domains", "ml_packages", "runtime_env"]
# What the llvm and triton roles install from the distribution that the test bed's image lacks: the site's
# Debian mirror holds stand-ins of them (name: bookworm's version, the files each puts on the host).
MIRRORED = {"llvm-19-dev": ("1:19.1.7-3~deb12u1", ["/usr/bin/llvm-config-19"]),
            "clang-19": ("1:19.1.7-3~deb12u1", ["/usr/bin/clang-19", "/usr/bin/clang++-19"]),
            "lld-19": ("1:19.1.7-3~deb12u1", ["/usr/bin/ld.lld-19"]),
            "build-essential": ("12.9", []),
            "nlohmann-json3-dev": ("3.11.2-2", ["/usr/include/nlohmann/json.hpp"])}
MIRROR_LIST = "/etc/apt/sources.list.d/site-debian-mirror.list"
# What apt itself writes when Ansible's apt module simulates an install in check mode (llvm's and triton's
# packages): its binary package caches, rebuilt from the lists, and the solver's log. Neither is a package,
# a source or a setting; everything else on the host must stay as it was.
APT_SIMULATION = ["/var/cache/apt/pkgcache.bin", "/var/cache/apt/srcpkgcache.bin", "/var/log/apt/eipp.log.xz"]


def _tool(*args):
    subprocess.run([sys.executable] + list(args), check=True, stdout=subprocess.DEVNULL)


def debian_mirror(root):
    """The site's Debian mirror (a signed flat apt repository under ``root``) with stand-ins of MIRRORED;
    returns the apt source line that names it and its keyring."""
    repo = os.path.join(root, "debian")
    work = tempfile.mkdtemp(prefix="mirror-")
    key = build_repo.Key(work, "site Debian mirror (sparkforge test)")
    try:
        for name, (version, files) in MIRRORED.items():
            build_repo.build_deb(repo, name, version, "amd64", section="devel",
                                 files=dict((path, "#!/bin/sh\necho '%s (stand-in)'\n" % os.path.basename(path))
                                            for path in files),
                                 description="stand-in of Debian's %s" % name)
        build_repo.index_flat_repo(repo, key, "Debian", "site mirror")
        key.export(os.path.join(root, "debian-mirror.gpg"))
    finally:
        key.close()
        shutil.rmtree(work, ignore_errors=True)
    return "deb [signed-by=%s/debian-mirror.gpg] file://%s /" % (root, repo)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The stand-in sources under the test bed's shared directory, and the hosts up."""
    testbed.up([HOST], log=lambda _m: None)
    testbed.restore(HOST)
    root = os.path.join(testbed.SHARE, "journey-%s" % uuid.uuid4().hex[:8])
    os.makedirs(root)
    try:
        tree = os.path.join(build_repo.build(), "tree")
        shutil.copytree(tree, os.path.join(root, "nvidia"))
        with open(os.path.join(build_repo.build(), "manifest.json")) as handle:
            stand_in = json.load(handle)
        installer = stand_in["cusparselt"]["0.8.1"]["debs"]["amd64"]
        wheels = os.path.join(root, "wheels")
        for args in (["torch", "2.10.0", "sparkforge-dep>=1"], ["sparkforge-dep", "1.0"],
                     ["torchvision", "0.25.0", "torch==2.10.0"], ["torchaudio", "2.10.0", "torch==2.10.0"]):
            _tool(WHEELS, "marker", wheels, *args)
        _tool(WHEELS, "index", os.path.join(root, "index"), *sorted(os.path.join(wheels, w) for w in os.listdir(wheels)))
        repos = os.path.join(root, "repos")
        _tool(os.path.join(FIXTURES, "pytorch", "make_repo.py"), os.path.join(repos, "pytorch"))
        _tool(os.path.join(FIXTURES, "torch_domains", "make_repos.py"), repos)
        # Triton and the LLVM it pins, and a stand-in of CUDA 13's ptxas (the host has no CUDA yet).
        triton = json.loads(subprocess.run([sys.executable, os.path.join(FIXTURES, "triton", "make_repos.py"),
                                            os.path.join(root, "triton-repos")], check=True,
                                           stdout=subprocess.PIPE, universal_newlines=True).stdout)
        ptxas = os.path.join(root, "cuda", "bin", "ptxas")
        os.makedirs(os.path.dirname(ptxas))
        shutil.copy2(triton["ptxas"], ptxas)
        mirror = debian_mirror(root)
        import ensurepip
        bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
        setuptools = [os.path.join(bundled, f) for f in os.listdir(bundled) if f.startswith("setuptools-")]
        _tool(WHEELS, "index", os.path.join(root, "build-index"), pinned_wheel(), *setuptools)
        group = {
            "sparkforge_components": COMPONENTS,
            "sparkforge_torch_version": "2.10.0",
            "sparkforge_torch_index_url": "file://%s/index/simple" % root,
            "pytorch_wheelhouse": wheels,
            "torch_domains_wheelhouse": wheels,
            # The stand-in repositories are NVIDIA's ubuntu2404 ones; the test bed runs Debian 12.
            "sparkforge_cuda_distro_map": {"Debian-12": "ubuntu2404"},
            "cuda_libs_repo_url": "file://%s/nvidia/compute/cuda/repos" % root,
            "cuda_libs_install_build_prereqs": False,
            "cusparselt_base_url": "file://%s/nvidia/compute/cusparselt/{version}/local_installers/" % root,
            "sparkforge_cusparselt_sha256": {"0.8.1": {"ubuntu2404": {"amd64": installer["sha256"]}}},
            # The stand-in keyring is not NVIDIA's (the manifest's pin): pinned as a site pins its mirror's.
            "sparkforge_cuda_keyring_sha256": stand_in["cuda_keyring"]["ubuntu2404/x86_64"],
            "pytorch_repo": "file://%s/pytorch" % repos,
            "torch_domains_repos": {"torchvision": "file://%s/torchvision" % repos,
                                    "torchaudio": "file://%s/torchaudio" % repos},
            # The site's package mirror for what the builds install (PyTorch's build requirements, the
            # wheels the built ones depend on): the stand-in holds `wheel` and setuptools.
            "sparkforge_fleet_pip_env": {"PIP_INDEX_URL": "file://%s/build-index/simple" % root},
            "pytorch_extra_env": {"PIP_INDEX_URL": "file://%s/build-index/simple" % root},
            "pytorch_features": {"cuda": False},
            "triton_repo": "file://%s" % triton["triton_repo"],
            "triton_llvm_repo": "file://%s" % triton["llvm_repo"],
            "triton_llvm_commit": triton["llvm_commit"],
            "triton_ptxas_path": ptxas,
            # The ML packages' index (the default profile's packages are not in it: with no venv, check mode
            # asks pip nothing; preflight reaches the index).
            "ml_packages_index_url": "file://%s/index/simple" % root,
            "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2, "torch_domains_jobs": 1,
            "sparkforge_fleet_wheelhouse": os.path.join(root, "fleet-wheelhouse"),
            "sparkforge_fleet_report_dir": os.path.join(root, "reports"),
            "preflight_allow_x86_64": True,
            "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]}],
            "preflight_min_ram_gib": 1, "preflight_min_ram_gib_source_build": 1,
            "preflight_min_disk_gib": 1, "preflight_min_disk_gib_source_build": 1,
        }
        hosts = {HOST: testbed.inventory_host(HOST)}
        inventory = os.path.join(root, "inventory.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}, handle, sort_keys=False)
        yield {"root": root, "logs": str(tmp_path_factory.mktemp("journey")), "inventory": inventory, "runs": 0,
               "predicted": {}, "ok": True, "mirror": mirror}
    finally:
        testbed.restore(HOST)  # as the test bed made it, for whoever runs next
        shutil.rmtree(root, ignore_errors=True)


def spark(site, host, *extra):
    """ansible-playbook playbooks/spark.yml as the README has it; returns (process, roles that changed)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", site["inventory"],
                           "--limit", host] + list(extra), cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=900, check=False)
    site["runs"] += 1
    # Each run's output stays in pytest's temporary directory, for a person.
    with open(os.path.join(site["logs"], "run-%02d.log" % site["runs"]), "w") as handle:
        handle.write(" ".join(extra) + "\n" + proc.stdout)
    return proc, changed_roles(proc.stdout, host)


def changed_roles(output, host):
    """The roles with a task that reported (or, in check mode, would report) `changed` on ``host``."""
    roles, role = set(), None
    for line in output.splitlines():
        head = re.match(r"^(?:TASK|RUNNING HANDLER) \[(?:[\w.]+\.)?(\w+) : ", line)
        if head:
            role = head.group(1)
        elif re.match(r"^(?:TASK|RUNNING HANDLER) \[", line):
            role = None  # a play's own task
        elif re.match(r"^changed: \[%s\b" % re.escape(host), line) and role:
            roles.add(role)
    return roles


def changes(before, after):
    """What differs between two filesystem snapshots, for the failure message."""
    a, b = set(before.splitlines()), set(after.splitlines())
    return {"gone": sorted(a - b)[:20], "new": sorted(b - a)[:20]}


def source_args(source):
    return ["-e", "sparkforge_torch_source=%s" % source]


@pytest.fixture
def stage(site, request):
    """The journey's state; a stage is skipped once an earlier one failed (its host is not as expected)."""
    if not site["ok"]:
        pytest.skip("an earlier stage of the journey failed")
    failed = request.session.testsfailed
    yield site
    if request.session.testsfailed > failed:
        site["ok"] = False


def test_1_fresh_host_check_mode_changes_nothing(stage):
    # The air-gapped host's Debian source is the site's mirror (its lists fetched, as on any provisioned site):
    # a fresh host all the same, with no venv and nothing of the stack.
    setup = testbed.exec_(HOST, "echo '%s' > %s && apt-get update -q -o Dir::Etc::sourcelist=%s "
                                "-o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0"
                                % (stage["mirror"], MIRROR_LIST, MIRROR_LIST))
    assert setup.returncode == 0, setup.stdout[-3000:]
    before = testbed.fs_snapshot(HOST, skip=APT_SIMULATION)
    for source in FRESH_SOURCES:
        # The source run takes every component but verify: llvm, triton (built) and ml_packages on a host with
        # no venv. The others keep the journey's components (stage 3 converges with them).
        extra = ["-e", json.dumps({"sparkforge_components": ALL_BUT_VERIFY})] if source == "source" else []
        proc, roles = spark(stage, HOST, "--check", "--diff", *(source_args(source) + extra))
        if source == "existing":
            # No torch to keep: preflight stops cleanly with the reason, before any role.
            assert proc.returncode == 2, proc.stdout[-5000:]
            assert "Preflight found" in proc.stdout and "nothing was changed" in proc.stdout, proc.stdout[-5000:]
            assert roles == set(), roles
        else:
            assert proc.returncode == 0, (source, proc.stdout[-8000:])
            assert re.search(r"^%s\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0" % HOST, proc.stdout, re.M)
            assert {"pytorch", "torch_domains", "runtime_env"} <= roles, (source, roles)
        if source == "source":
            # Each reports the change the real run makes: the LLVM packages and their links, Triton's build
            # and the venv it is built in, the ML packages the venv lacks.
            assert {"llvm", "triton", "ml_packages"} <= roles, roles
        stage["predicted"][("fresh", source)] = roles
        after = testbed.fs_snapshot(HOST, skip=APT_SIMULATION)
        assert after == before, ("check mode with torch source %s changed the host" % source, changes(before, after))


def test_2_preflight_stops_an_unfit_host_before_any_change(stage):
    before = testbed.fs_snapshot(HOST)
    proc, roles = spark(stage, HOST, *source_args("index"),
                        "-e", "sparkforge_torch_index_url=https://download.pytorch.org/whl/cu130")
    assert proc.returncode == 2 and roles == set(), proc.stdout[-5000:]
    assert "pytorch: torch package index is unreachable: point sparkforge_torch_index_url" in proc.stdout, \
        proc.stdout[-5000:]
    assert "nothing was changed" in proc.stdout
    after = testbed.fs_snapshot(HOST)
    assert after == before, changes(before, after)


# One converge, torch from the index (the host stage 4 checks): a converge from the wheelhouse on a container
# host is molecule's `pytorch` scenario, and on this machine tests/integration/test_result_is_the_plan.py's.
@pytest.mark.parametrize("source", ["index"])
def test_3_converge_changes_what_check_mode_said(stage, source):
    testbed.restore(HOST)
    proc, roles = spark(stage, HOST, *source_args(source))
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert roles == stage["predicted"][("fresh", source)], (source, roles, stage["predicted"][("fresh", source)])
    state = testbed.exec_(HOST, "/opt/sparkforge/venv/bin/python -c 'import torch, torchvision, torchaudio; "
                                "print(torch.__version__, torchvision.__version__, torchaudio.__version__)'").stdout
    assert state.split() == ["2.10.0", "0.25.0", "2.10.0"], state


def test_4_check_mode_on_the_provisioned_host_changes_nothing(stage):
    # The host from stage 3 (torch from the index).
    before = testbed.fs_snapshot(HOST)
    for source in PROVISIONED_SOURCES:
        proc, roles = spark(stage, HOST, "--check", "--diff", *source_args(source))
        assert proc.returncode == 0, (source, proc.stdout[-8000:])
        stage["predicted"][("provisioned", source)] = roles
        after = testbed.fs_snapshot(HOST)
        assert after == before, ("check mode with torch source %s changed the host" % source, changes(before, after))
    for source in ("index", "wheelhouse"):
        assert stage["predicted"][("provisioned", source)] == set(), (source, stage["predicted"])
    assert "pytorch" in stage["predicted"][("provisioned", "source")], stage["predicted"]


@pytest.mark.full  # the reruns (a source build among them) are the full suite's; the quick lane stops at stage 4
def test_5_reruns_change_what_check_mode_said(stage):
    # The no-op rerun (torch from the index, as converged).
    proc, roles = spark(stage, HOST, *source_args("index"))
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert roles == stage["predicted"][("provisioned", "index")] == set(), roles
    # Switching to a source build: it builds and installs what check mode said.
    proc, roles = spark(stage, HOST, *source_args("source"))
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert roles == stage["predicted"][("provisioned", "source")], (roles, stage["predicted"])
    # Again, with the wheel now cached: check mode predicts nothing, and nothing changes.
    before = testbed.fs_snapshot(HOST)
    proc, predicted = spark(stage, HOST, "--check", "--diff", *source_args("source"))
    assert proc.returncode == 0, proc.stdout[-8000:]
    after = testbed.fs_snapshot(HOST)
    assert after == before, changes(before, after)
    proc, roles = spark(stage, HOST, *source_args("source"))
    assert proc.returncode == 0 and roles == predicted == set(), (roles, predicted, proc.stdout[-8000:])
