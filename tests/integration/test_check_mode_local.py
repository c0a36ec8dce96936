"""Check mode of the provisioning playbook on this machine (connection local, no containers).

The host is a stand-in: a fake nvidia-smi (GH200), a temporary prefix, and a venv whose torch,
torchvision, torchaudio, Triton and einops (the one ML package it asks for) are fixture distributions (a
package directory with a dist-info, at the versions the manifest pairs with torch 2.11.0).

- Provisioned host, torch source existing, every default component but verify (llvm, triton and
  ml_packages among them): `playbooks/spark.yml --check --diff` exits 0, reports no change, and the
  prefix is byte for byte what it was.
- A venv that lacks the planned torch (source index / wheelhouse): check mode exits 0, reports
  the install as the change the real run makes, and touches nothing.
- A wheelhouse whose torch needs a dependency it lacks: the real run fails, and the failure message and the
  fleet summary carry pip's own reason (not just "non-zero return code"). A wheelhouse without torch stops
  preflight (docs/bad-inputs.md W13).

The same matrix for a fresh host (no venv) and for a provisioned host with torch from the index or a
wheelhouse is the journey's (tests/e2e/test_journey.py, stages 1 and 4, on a container host, the host's
whole filesystem snapshotted), so it is not repeated here.

The README's Quickstart line with `--check`, `scripts/spark --check`, runs here as written, from the root of a
stand-in checkout whose inventory/hosts.yml is this machine with the fake GPU (the provisioned host, torch
alone): exit 0, no change, the prefix unchanged.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

import readme
from helpers import GH200, REPO, fake_smi, setup_keeps, user_checkout, user_env, venv_template

from ansible_collections.sparkforge.stack.plugins.module_utils.host.venv import MARKER

BIN = os.path.dirname(sys.executable)
TORCH = "2.11.0"
# What the manifest pairs with torch 2.11.0, and the `minimal` ML profile.
PAIRED = {"torchvision": "0.26.0", "torchaudio": "2.11.0", "triton": "3.6.0"}
MINIMAL = {"einops": "0.8.2"}  # the manifest's pin (sparkforge_ml_package_pins)
# What the fixture torch's torch.cuda.get_arch_list() says: not the GH200 default (9.0), so the plan's list shows
# where it came from.
TORCH_ARCHS = ["sm_90", "sm_100"]


def add_dist(site, name, version, local="", cuda=None, archs=None):
    """A fixture distribution: an importable package and its dist-info (what pip and importlib see).
    With ``cuda`` the package has a ``version`` module whose ``cuda`` is that (torch.version.cuda); with
    ``archs`` a ``cuda`` module whose get_arch_list() gives them (torch.cuda.get_arch_list())."""
    module = name.replace("-", "_")
    os.makedirs(os.path.join(site, module), exist_ok=True)
    with open(os.path.join(site, module, "__init__.py"), "w") as handle:
        handle.write('__version__ = "%s%s"\n' % (version, local))
        if cuda is not None:
            handle.write("from . import version\n")
        if archs is not None:
            handle.write("from . import cuda\n")
    if cuda is not None:
        with open(os.path.join(site, module, "version.py"), "w") as handle:
            handle.write("cuda = %r\n" % (cuda or None))
    if archs is not None:
        with open(os.path.join(site, module, "cuda.py"), "w") as handle:
            handle.write("def get_arch_list():\n    return %r\n" % list(archs))
    info = os.path.join(site, "%s-%s.dist-info" % (module, version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    with open(os.path.join(info, "RECORD"), "w") as handle:
        handle.write("")
    with open(os.path.join(info, "INSTALLER"), "w") as handle:
        handle.write("pip\n")


@pytest.fixture(scope="module")
def template_venv(tmp_path_factory):
    """One venv with pip, copied per test (make_host): made once for the whole session, in the session's base
    temporary directory, though each module that imports this fixture holds its own (a venv with pip is about
    5 s of CPU). Nothing writes to it."""
    return pathlib.Path(venv_template(str(tmp_path_factory.getbasetemp()), "template-venv",
                                      lambda where: subprocess.run([sys.executable, "-m", "venv", where], check=True)))


def site_packages(venv):
    return subprocess.check_output([os.path.join(venv, "bin", "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()


# Every default component but verify, which needs a real torch on a GPU (its check mode is the verify
# role's own; issue 27).
ALL_BUT_VERIFY = ["cuda_libs", "cusparselt", "llvm", "triton", "pytorch", "torch_domains", "ml_packages", "runtime_env"]
# The torch install alone (faster: the other roles' check mode is covered by the ALL_BUT_VERIFY run).
TORCH_ONLY = ["triton", "pytorch", "torch_domains"]


def make_host(root, template, source, torch=True, venv=True, components=ALL_BUT_VERIFY, gpu=GH200, more=None):
    """Inventory for localhost with its prefix under ``root``; returns a dict of paths. The venv is one sparkforge
    made (its marker in it). With ``venv`` false the host has no venv at all (a fresh host;
    tests/integration/test_validate_playbook.py); ``more``: further inventory variables."""
    prefix = root / "prefix"
    prefix.mkdir()
    if venv:
        subprocess.run(["cp", "-a", str(template), str(prefix / "venv")], check=True)
        # The venv an earlier run of sparkforge made: its completion marker (a venv without it is the user's, which
        # preflight refuses unless sparkforge_venv_adopt; tests/integration/test_ownership_local.py).
        (prefix / "venv" / MARKER).write_text(json.dumps({"python": sys.executable}) + "\n")
        # A copied venv's scripts name the template's path; the interpreter link is what matters here.
        site = site_packages(str(prefix / "venv"))
        if torch:
            add_dist(site, "torch", TORCH, "+cu130", cuda="13.0", archs=TORCH_ARCHS)
            for name, version in PAIRED.items():
                add_dist(site, name, version)
        for name, version in MINIMAL.items():
            add_dist(site, name, version)
    wheelhouse = root / "wheelhouse"
    wheelhouse.mkdir()
    smi_dir = root / "smi"
    smi_dir.mkdir()
    group = {
        "sparkforge_prefix": str(prefix),
        "sparkforge_torch_source": source,
        "sparkforge_torch_version": TORCH,
        "sparkforge_wheel_dir": str(wheelhouse),
        "preflight_allow_x86_64": True,
        "preflight_min_ram_gib": 1,
        "preflight_min_disk_gib": 1,
        "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]},
                                              {"distribution": "Ubuntu", "versions": ["22.04", "24.04"]}],
        "sparkforge_probe_sources": False,
        "sparkforge_components": components,
        "sparkforge_fleet_wheelhouse": str(root / "fleet-wheelhouse"),
        "sparkforge_fleet_report_dir": str(root / "fleet-reports"),
        "sparkforge_reports_dir": str(root / "reports"),
        "runtime_env_profile_path": str(root / "profile.d" / "sparkforge.sh"),
        # One ML package (each costs a pip dry run); pip reads no index (it is already in the venv).
        "ml_packages_profile": "",
        "ml_packages_packages": ["einops"],
        "ml_packages_no_index": True,
        "pytorch_index_url": "file://%s/index" % root,
        "torch_domains_index_url": "file://%s/index" % root,
    }
    group.update(more or {})
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "preflight_nvidia_smi": fake_smi(str(smi_dir), "localhost", gpu)}
    inventory = root / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": host}, "vars": group}}))
    return {"root": root, "prefix": prefix, "inventory": str(inventory), "wheelhouse": wheelhouse}


def snapshot(*dirs):
    """Every path under ``dirs`` with its type, size, mode and mtime (what a change would move)."""
    seen = {}
    for top in dirs:
        top = str(top)
        if not os.path.exists(top):
            seen[top] = None
            continue
        for base, subdirs, files in os.walk(top):
            for name in subdirs + files:
                path = os.path.join(base, name)
                st = os.lstat(path)
                seen[path] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return seen


def playbook(host, *extra, timeout=300, env=None):
    """ansible-playbook spark.yml against the stand-in host; ``env`` replaces entries of the run's (the
    host's, with connection local) environment, None values removing them."""
    base = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    base.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                ANSIBLE_LOCAL_TEMP=str(host["root"] / "ansible-tmp"))
    for key, value in (env or {}).items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    env = base
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", host["inventory"]]
                          + list(extra), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    recap = re.search(r"localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout)
    return proc, ({"ok": int(recap.group(1)), "changed": int(recap.group(2)), "failed": int(recap.group(3))}
                  if recap else None)


def task_status(out, name):
    """The status word (ok, changed, skipping, fatal) of the first task whose name contains ``name``
    (None when it did not run: skipped tasks are not shown)."""
    match = re.search(r"^TASK \[[^\]]*%s[^\]]*\][^\n]*\n(\w+)" % re.escape(name), out, re.M)
    return match.group(1) if match else None


def watched(host):
    root = host["root"]
    return [host["prefix"], root / "reports", root / "fleet-reports", root / "fleet-wheelhouse", root / "profile.d",
            host["wheelhouse"]]


def test_check_mode_on_a_provisioned_host_changes_nothing(tmp_path, template_venv):
    host = make_host(tmp_path, template_venv, "existing", components=ALL_BUT_VERIFY)
    before = snapshot(*watched(host))
    proc, recap = playbook(host, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert recap and recap["failed"] == 0, proc.stdout[-4000:]
    # Nothing to install: torch and its libraries are the planned ones.
    for task in ("Install torch from", "Install the paired libraries", "Install the prebuilt Triton wheel"):
        assert task_status(proc.stdout, task) in (None, "ok"), task
    # Torch existing: the plan read the venv's torch's own arch list once and shows it; runtime_env (its
    # --diff) exports that list, read from the plan (issue 45).
    out = " ".join(proc.stdout.replace("''", "'").split())  # the callback's YAML folds and quotes the plan text
    assert "arch list 9.0;10.0 for torch, domains, ml_builds, runtime [the installed torch's own arch list " \
           "(torch.cuda.get_arch_list() in %s: sm_90, sm_100)]" % (host["prefix"] / "venv") in out, proc.stdout[-4000:]
    assert "+export TORCH_CUDA_ARCH_LIST='9.0;10.0'" in proc.stdout, proc.stdout[-4000:]
    assert snapshot(*watched(host)) == before


@pytest.mark.parametrize("source", ["index", "wheelhouse"])
def test_check_mode_reports_the_torch_install_and_changes_nothing(tmp_path, template_venv, source):
    # The one arch input goes through the plan: validated there and named as the reason for every consumer
    # (issues 45, 55).
    more = {"sparkforge_cuda_arch_list": "9.0;10.0"} if source == "index" else {}
    host = make_host(tmp_path, template_venv, source, torch=False, components=TORCH_ONLY, more=more)
    if source == "wheelhouse":
        # The planned torch wheel (preflight refuses a wheelhouse without it: docs/bad-inputs.md W13).
        from test_result_is_the_plan import torch_wheel
        torch_wheel(host["wheelhouse"], TORCH, "13.0")
    before = snapshot(*watched(host))
    proc, recap = playbook(host, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = proc.stdout
    # The installs the real run makes are reported as changes (their commands printed, not run).
    task = "Install torch from the %s" % ("PyTorch index" if source == "index" else "wheelhouse")
    assert task_status(out, task) == "changed", out[-4000:]
    assert task_status(out, "Install the paired libraries") == "changed", out[-4000:]
    assert recap["changed"] > 0
    if more:
        assert "arch list 9.0;10.0 for torch, domains, ml_builds, runtime [set by sparkforge_cuda_arch_list]" \
            in " ".join(out.split()), out[-4000:]
    assert snapshot(*watched(host)) == before


def test_a_wheelhouse_without_a_dependency_of_torch_fails_with_pips_reason(tmp_path, template_venv):
    """The wheelhouse's torch needs a distribution the wheelhouse lacks (preflight checks torch itself, W13;
    its dependencies are pip's to resolve): the failure carries pip's own reason."""
    from test_result_is_the_plan import torch_wheel
    host = make_host(tmp_path, template_venv, "wheelhouse", torch=False, components=["pytorch"])
    torch_wheel(host["wheelhouse"], TORCH, "13.0", requires=["sparkforge-absent-dep"])
    proc, recap = playbook(host)
    assert proc.returncode != 0, proc.stdout[-4000:]
    out = proc.stdout
    # The failing task's own message carries pip's reason...
    assert re.search(r"msg: .*pip install torch.*exit 1.*No matching distribution found for sparkforge-absent-dep",
                     out.replace("\n        ", " ")), out[-4000:]
    # ...and so do the fleet summary and the run's last failure.
    with open(tmp_path / "fleet-reports" / "fleet-summary.json") as handle:
        summary = json.load(handle)
    error = summary["hosts"]["localhost"]["error"] if "hosts" in summary else summary["localhost"]["error"]
    assert "No matching distribution found for sparkforge-absent-dep" in error, error
    assert "non-zero return code" not in error


def test_the_quickstart_scripts_spark_check_with_a_fake_gpu(tmp_path, template_venv):
    """`scripts/spark --check`, the Quickstart's line as written with the --check the README names, from the
    root of a stand-in checkout (this repository's scripts, playbooks and collection; .venv the tests' venv)
    whose inventory/hosts.yml, scripts/spark's default, is this machine with a fake GH200."""
    reason = setup_keeps(sys.prefix)
    if reason:
        pytest.fail(reason)  # scripts/setup would build the tests' own venv again through the checkout's .venv
    host = make_host(tmp_path, template_venv, "existing", components=["pytorch"])
    checkout = user_checkout(tmp_path)
    for name in ("scripts", "pyproject.toml"):
        os.symlink(os.path.join(REPO, name), os.path.join(checkout, name))
    # The README sets no reports directory: the roles' defaults (reports/ where scripts/spark is run) hold.
    with open(host["inventory"]) as handle:
        inventory = yaml.safe_load(handle)
    for name in ("sparkforge_fleet_report_dir", "sparkforge_reports_dir"):
        del inventory["all"]["vars"][name]
    with open(os.path.join(checkout, "inventory", "hosts.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    line = readme.command("README.md", "scripts/spark", heading="## Quickstart").split("#")[0].strip() + " --check"
    assert line == "scripts/spark --check", line
    assert "`--check` shows the plan" in readme.section("README.md", "## Quickstart")
    env = dict((k, v) for k, v in user_env(checkout).items() if not k.startswith("PIP_"))
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    before = snapshot(*watched(host))
    proc = subprocess.run(["bash", "-c", line], cwd=checkout, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    out = proc.stdout
    (tmp_path / "run.log").write_text(out)  # for a person
    assert "== creating .venv" not in out, out[-4000:]  # scripts/setup kept the venv
    assert proc.returncode == 0, out[-4000:]
    recap = re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", out)
    assert recap and recap.group(1) == "0", out[-4000:]
    assert not os.path.exists(os.path.join(checkout, "reports"))  # check mode: the default directory not made
    # The plan, for the fake GPU: the venv's torch, the one it has.
    assert "platform gh200 (9.0), PyTorch %s from existing" % TORCH in out, out[-4000:]
    assert re.search(r"pytorch\s+install\s+PyTorch %s from the existing" % re.escape(TORCH), out), out[-4000:]
    assert snapshot(*watched(host)) == before
