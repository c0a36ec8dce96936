"""Issue 33, engineer h3's rows of docs/bad-inputs.md: the result is the plan (R..), paths on the host and
command argv (H..), check mode fails where the real run would (C..).

Each row is a pytest param whose id is the row id.  Unit-level rows call the rule in module_utils (the
exact message); end-to-end rows run playbooks/spark.yml against this machine (connection local, a fake
nvidia-smi, a temporary prefix: tests/integration/test_check_mode_local.py's stand-in host) and assert the exit
code, the message and that nothing changed (a snapshot of the host's paths and `git status` of the
checkout).  For the result-is-the-plan rows the install has happened when the check refuses: they assert
the exit code, the message and that the run does not call the host provisioned.

Stand-in torch wheels: a package `torch` whose `__version__` carries the local tag (+cu130, +cpu) and whose
`torch.version.cuda` is the CUDA it was built with (None for a CPU build), as the real wheels have.
"""

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile

import pytest
import yaml

from helpers import COLLECTIONS, GB10, GH200, REPO
from test_check_mode_local import TORCH, make_host, playbook, snapshot, task_status, template_venv, watched  # noqa: F401

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.host import host_paths, platforms  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils._common import run_env  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import pip_env  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_result as tr  # noqa: E402

ZIP_DATE = (2026, 1, 1, 0, 0, 0)


def torch_wheel(dest, version, cuda, requires=(), name="torch"):
    """A stand-in torch wheel torch-<version>-py3-none-any.whl; ``cuda`` None: a CPU build; ``requires``: its
    Requires-Dist lines; ``name``: another distribution (its package holds the same two modules)."""
    files = [("%s/__init__.py" % name, "__version__ = %r\nfrom . import version  # noqa\n" % version),
             ("%s/version.py" % name, "__version__ = %r\ncuda = %r\n" % (version, cuda))]
    info = "%s-%s.dist-info" % (name, version)
    files += [("%s/METADATA" % info, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
        name, version, "".join("Requires-Dist: %s\n" % r for r in requires))),
              ("%s/WHEEL" % info, "Wheel-Version: 1.0\nGenerator: sparkforge-test\nRoot-Is-Purelib: true\n"
                                  "Tag: py3-none-any\n")]
    record = []
    for path, text in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    files.append(("%s/RECORD" % info, "\n".join(record + ["%s/RECORD,," % info]) + "\n"))
    os.makedirs(str(dest), exist_ok=True)
    path = os.path.join(str(dest), "%s-%s-py3-none-any.whl" % (name, version))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files:
            archive.writestr(zipfile.ZipInfo(name, ZIP_DATE), text)
    with open(path, "wb") as handle:
        handle.write(buf.getvalue())
    return path


def set_vars(host, **values):
    """Add group variables to the stand-in host's inventory."""
    with open(host["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"].update(values)
    with open(host["inventory"], "w") as handle:
        yaml.safe_dump(data, handle)


def git_status():
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout


def flat(out):
    """The run's output with Ansible's line folding undone (messages are searched as one line)."""
    return re.sub(r"\s+", " ", out)


def not_provisioned(out):
    """The run does not call this host provisioned (the fleet summary's state, the last play)."""
    return "was not provisioned" in out and not re.search(r"localhost\W+state\W+provisioned", out)


# ---------------------------------------------------------------------------- R: the result is the plan (units)
INDEX = "https://download.pytorch.org/whl/cu130"


@pytest.mark.parametrize("source, index, version, cuda, expected", [
    pytest.param("index", INDEX, "2.11.0+cpu", None, "a CPU build on a host with a GPU", id="R01"),
    pytest.param("index", INDEX, "2.11.0+cu128", "12.8", "local version tag +cu128, planned +cu130", id="R02"),
    pytest.param("index", INDEX, "2.11.0", "13.0", "local version tag none, planned +cu130", id="R03"),
    pytest.param("index", INDEX, "2.10.0+cu130", "13.0", "release 2.10.0, planned 2.11.0", id="R04"),
    pytest.param("wheelhouse", "", "2.11.0+cu126", "12.6", "CUDA 12.6, planned CUDA 13.x", id="R05"),
    pytest.param("source", "", "2.11.0+cpu", None, "local version tag +cpu, planned none", id="R06"),
    pytest.param("existing", "", "2.11.0", "None", "a CPU build on a host with a GPU", id="R07"),
])
def test_the_installed_torch_must_be_the_planned_build(source, index, version, cuda, expected):
    plan = tr.planned_build(TORCH, source, index, 13)
    message = tr.result_message("/opt/sparkforge/venv", plan, version, cuda, source)
    assert expected in message, message
    # Both named: what was planned and what was found.
    assert "planned torch %s" % plan["words"] in message and "imports torch %s" % version in message
    assert message.endswith("not provisioned")


def test_the_planned_build_passes():
    assert tr.result_message("/v", tr.planned_build(TORCH, "index", INDEX), "2.11.0+cu130", "13.0", "index") == ""
    assert tr.result_message("/v", tr.planned_build(TORCH, "wheelhouse"), "2.11.0", "13.0", "wheelhouse") == ""
    # A plan whose build turns CUDA off (pytorch_features.cuda false) accepts the CPU build it asked for.
    assert tr.result_message("/v", tr.planned_build(TORCH, "source"), "2.11.0", None, "source", gpu=False) == ""


@pytest.mark.parametrize("arch_list, gpus, missing", [
    pytest.param("9.0", ["12.1"], "12.1", id="R08"),
    pytest.param("12.0a", ["12.1"], "12.1", id="R09"),
    pytest.param("9.0;12.1", ["9.0", "12.1", "10.0"], "10.0", id="R10"),
    pytest.param("12.1", ["12.0"], "12.0", id="R11"),
])
def test_an_explicit_arch_list_must_cover_every_gpu_of_the_host(arch_list, gpus, missing):
    with pytest.raises(tb.ArchListError) as caught:
        tb.plan_arch_list(arch_list, "2.11.0", {}, "dgx_spark", gpus, {"arch_min_version": {}}, {})
    message = str(caught.value)
    assert "sparkforge_cuda_arch_list %r has no code for this host's GPU capability %s" % (arch_list, missing) \
        in message, message
    assert "(the host has %s)" % ", ".join(gpus) in message


def test_the_binary_compatibility_rules():
    entry = arch.parse_list
    assert arch.runs_on("12.0", "12.1") and not arch.runs_on("12.1", "12.0")
    assert not arch.runs_on("12.0a", "12.1") and arch.runs_on("12.1a", "12.1")
    assert arch.runs_on("9.0+PTX", "12.1") and not arch.runs_on("9.0", "12.1")
    assert arch.runs_on("12.0f", "12.1") and not arch.runs_on("12.0f", "13.0")
    assert tb.uncovered_capabilities(entry("8.0;9.0;10.0;11.0;12.0+PTX"), ["9.0", "12.1"]) == []


# ---------------------------------------------------------------------------- R: pip isolated from the host
def test_every_pip_call_ignores_the_hosts_pip_configuration():
    env = pip_env.isolated_environ({"PIP_FIND_LINKS": "/stray", "PIP_INDEX_URL": "http://x", "PATH": "/bin"},
                                   {"PIP_CERT": "/ca.pem", "https_proxy": "http://proxy:3128"})
    assert env == {"PATH": "/bin", "PIP_CONFIG_FILE": os.devnull, "PIP_CERT": "/ca.pem",
                   "https_proxy": "http://proxy:3128", "PYTHONNOUSERSITE": "1"}
    argv = pip_env.isolated_argv("/v/bin/python", "install", ["torch==2.11.0+cu130"],
                                 {"PIP_INDEX_URL": "https://mirror/simple", "PIP_NO_INDEX": "0",
                                  "PIP_TRUSTED_HOST": "a b", "https_proxy": "http://p"}, "--cert '/a b.pem'")
    assert argv == ["/v/bin/python", "-m", "pip", "install", "--isolated", "--index-url", "https://mirror/simple",
                    "--trusted-host", "a", "--trusted-host", "b", "--cert", "/a b.pem", "torch==2.11.0+cu130"]
    task = pip_env.task_environment({"PIP_INDEX_URL": "x", "https_proxy": "p"})
    # The PYTHON* variables that change what python imports are blanked (a task cannot remove a variable).
    assert task == dict(((name, "") for name in run_env.TASK_BLANKS), https_proxy="p", PIP_CONFIG_FILE=os.devnull,
                        PYTHONNOUSERSITE="1")


@pytest.mark.parametrize("plan_env, expected", [
    pytest.param({"PIP_NO_INDEX": "maybe"}, "triton_pip_env sets PIP_NO_INDEX='maybe': a switch takes", id="R16"),
])
def test_a_pip_setting_of_the_plan_without_a_command_line_form_is_refused(plan_env, expected):
    with pytest.raises(pip_env.PipEnvError) as caught:
        pip_env.isolated_argv("/v/bin/python", "install", ["triton"], plan_env, variable="triton_pip_env")
    assert expected in str(caught.value)


def test_pip_under_the_isolation_reads_neither_the_environment_nor_a_config_file(tmp_path):
    """The real pip: a stray find-links in the environment and in a pip.conf are not read."""
    stray = tmp_path / "stray"
    torch_wheel(stray, "2.11.0+cpu", None)
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = %s\n" % stray)
    host_env = dict(os.environ, PIP_FIND_LINKS=str(stray), PIP_CONFIG_FILE=str(conf))
    argv = pip_env.isolated_argv(sys.executable, "download", ["--no-index", "--no-deps", "-d", str(tmp_path / "d"),
                                                              "torch==2.11.0"])
    seen = subprocess.run(argv, env=dict(host_env, **pip_env.task_environment({})), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert seen.returncode != 0 and "No matching distribution found for torch==2.11.0" in seen.stdout, seen.stdout
    # The same call without the isolation finds the stray CPU wheel: the test sees what it claims to.
    plain = subprocess.run(argv[:4] + argv[5:], env=host_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, check=False)
    assert plain.returncode == 0, plain.stdout


# ---------------------------------------------------------------------------- H: paths on the host (units)
@pytest.fixture
def immutable(tmp_path):
    """A directory nobody (root included) can write: chattr +i, removed after the test."""
    path = tmp_path / "locked"
    path.mkdir()
    if subprocess.run(["chattr", "+i", str(path)], check=False).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("make, kind, expected", [
    pytest.param(lambda t: (t / "afile").write_text("x") and str(t / "afile" / "venv"), "dir",
                 "its parent {t}/afile is a regular file, not a directory", id="H01"),
    pytest.param(lambda t: (t / "afile").write_text("x") and str(t / "afile" / "a" / "b" / "venv"), "dir",
                 "its parent {t}/afile is a regular file, not a directory", id="H02"),
    pytest.param(lambda t: (t / "afile").write_text("x") and str(t / "afile"), "dir",
                 "{t}/afile is a regular file, not a directory", id="H03"),
    pytest.param(lambda t: (t / "d").mkdir() or str(t / "d"), "file", "{t}/d is a directory, not a file", id="H04"),
    pytest.param(lambda t: os.symlink(str(t / "gone"), str(t / "dangling")) or str(t / "dangling" / "v"), "dir",
                 "its parent {t}/dangling is a dangling symlink, not a directory", id="H05"),
])
def test_a_path_under_a_file_is_refused_naming_variable_path_and_parent(tmp_path, make, kind, expected):
    path = make(tmp_path)
    before = snapshot(tmp_path)
    message = host_paths.path_problem("sparkforge_venv", path, kind)
    assert message and message.startswith("sparkforge_venv=%s" % path), message
    assert expected.format(t=tmp_path) in message, message
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("below, expected", [
    pytest.param("venv", "its parent {d} is not writable by this user: the directory cannot be created", id="H06"),
    pytest.param("a/b/venv", "its parent {d} is not writable by this user", id="H07"),
    pytest.param("", "{d} is not writable by this user", id="H08"),
])
def test_an_unwritable_directory_is_refused(immutable, below, expected):
    path = os.path.join(str(immutable), below) if below else str(immutable)
    message = host_paths.path_problem("sparkforge_venv", path.rstrip("/"))
    assert message and expected.format(d=immutable) in message, message


def test_usable_paths_pass(tmp_path):
    assert host_paths.path_problem("v", str(tmp_path / "new" / "venv")) is None
    assert host_paths.path_problem("v", str(tmp_path / "profile.d" / "x.sh"), "file") is None
    assert host_paths.path_problem("v", "") is None


# ---------------------------------------------------------------------------- side finding: CUDA distro by major
def test_the_cuda_distro_matches_the_major_version_and_has_no_default():
    table = {"Ubuntu-24.04": "ubuntu2404", "Debian-12": "debian12", "DGX OS-7": "ubuntu2404"}
    assert platforms.cuda_distro("Debian", "12.11", table) == "debian12"
    assert platforms.cuda_distro("DGX OS", "7.2", table) == "ubuntu2404"
    assert platforms.cuda_distro("Ubuntu", "24.04", table) == "ubuntu2404"
    assert platforms.cuda_distro("Ubuntu", "25.10", table) is None
    assert platforms.cuda_distro_keys("Debian", "13.1") == ["Debian-13.1", "Debian-13"]


# ---------------------------------------------------------------------------- end to end
# Each row below runs playbooks/spark.yml (10-40 s each, about 110 s together on a loaded 2-core machine): the
# full suite's (scripts/test runs this module in molecule's lane); the quick lane keeps the unit rows above.
@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("R12", "R13", "R14"), id="R12+R13+R14")])
def test_stray_pip_configuration_and_cpu_builds_are_not_provisioned(tmp_path, template_venv, rows):  # noqa: F811
    """R12: a wheelhouse whose torch needs a dependency it lacks, on a host whose environment names a stray
    find-links directory holding that dependency and a CPU torch: pip reads none of it, the install fails with
    pip's reason, not provisioned (a wheelhouse without torch at all stops preflight: W13).
    R13: the same through a pip.conf (the user's configuration file).  R14: the wheelhouse holds the
    planned release as a CPU build: installed, then refused by the final check, not provisioned."""
    host = make_host(tmp_path, template_venv, "wheelhouse", torch=False, components=["pytorch"])
    needy = torch_wheel(host["wheelhouse"], TORCH, "13.0", requires=["sparkforge-stray-dep"])
    stray = tmp_path / "stray"
    torch_wheel(stray, TORCH + "+cpu", None)
    torch_wheel(stray, "1.0", None, name="sparkforge_stray_dep")
    xdg = tmp_path / "xdg"
    (xdg / "pip").mkdir(parents=True)
    (xdg / "pip" / "pip.conf").write_text("[global]\nfind-links = %s\nno-index = true\n" % stray)
    status = git_status()
    proc, _ = playbook(host, env={"PIP_FIND_LINKS": str(stray), "PIP_NO_INDEX": None, "PIP_CONFIG_FILE": None,
                                  "XDG_CONFIG_HOME": str(xdg)})
    out = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "No matching distribution found for sparkforge-stray-dep" in out, proc.stdout[-3000:]  # R12, R13
    assert not_provisioned(out), proc.stdout[-3000:]
    site = subprocess.check_output([str(host["prefix"] / "venv" / "bin" / "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()
    assert not os.path.exists(os.path.join(site, "torch")), "the stray CPU torch was installed"
    assert git_status() == status

    # R14: the wheelhouse itself holds only the CPU build of the planned release.
    os.remove(needy)
    torch_wheel(host["wheelhouse"], TORCH + "+cpu", None)
    proc, _ = playbook(host)
    out = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert ("imports torch %s+cpu (CUDA none: a CPU build), planned torch %s (CUDA 13.x) from source wheelhouse"
            % (TORCH, TORCH)) in out, proc.stdout[-3000:]
    assert "a CPU build on a host with a GPU" in out and not_provisioned(out)
    assert git_status() == status


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("R15",), id="R15")])
def test_an_explicit_arch_list_without_the_hosts_gpu_is_refused_in_preflight(tmp_path, template_venv, rows):  # noqa: F811
    """R15: sparkforge_cuda_arch_list 9.0 on a GB10 host (as a host in both the dgx_spark and gh200 groups
    gets it): refused in preflight, check mode and the real run alike, naming the list and the GPU."""
    host = make_host(tmp_path, template_venv, "index", torch=False, components=["pytorch"], gpu=GB10)
    set_vars(host, sparkforge_cuda_arch_list="9.0")
    before, status = snapshot(*watched(host)), git_status()
    for extra in (["--check"], []):
        proc, _ = playbook(host, *extra)
        out = flat(proc.stdout)
        assert proc.returncode == 2, proc.stdout[-3000:]
        assert "sparkforge_cuda_arch_list '9.0' has no code for this host's GPU capability 12.1" in out, \
            proc.stdout[-3000:]
        assert "nothing was changed" in out
    assert snapshot(*watched(host)) == before and git_status() == status


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("H09",), id="H09")])
def test_a_venv_path_with_a_space_and_a_quote_works_at_exactly_that_path(tmp_path, template_venv, rows):  # noqa: F811
    """H09: the venv at `.../my venv's place/venv` is created there and torch installed into it (every
    command an argument list); nothing is created anywhere else, in the checkout least of all.  The
    installed torch is the planned build (release and CUDA 13), and the run says so."""
    host = make_host(tmp_path, template_venv, "wheelhouse", torch=False, venv=False, components=["pytorch"])
    venv = tmp_path / "my venv's place" / "venv"
    set_vars(host, sparkforge_venv=str(venv))
    torch_wheel(host["wheelhouse"], TORCH, "13.0")
    status = git_status()
    listing = sorted(os.listdir(str(tmp_path)))
    proc, recap = playbook(host)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert os.path.isfile(str(venv / "bin" / "python"))
    assert "torch %s (CUDA 13.0) in %s (source wheelhouse)" % (TORCH, venv) in flat(proc.stdout)
    # Only the venv's own directory is new under the root (and Ansible's temporary directory, reports).
    assert set(os.listdir(str(tmp_path))) - set(listing) <= {"my venv's place", "ansible-tmp", "fleet-reports"}
    assert os.listdir(str(tmp_path / "my venv's place")) == ["venv"]
    assert git_status() == status


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("H10", "H11", "H12", "C01"), id="H10+H11+H12+C01")])
def test_bad_host_paths_are_refused_in_preflight_in_check_mode_too(tmp_path, template_venv, rows):  # noqa: F811
    """H10 (venv under a regular file), H11 (runtime_env_profile_path under a regular file) and H12 (the
    ML packages' report directory in a directory nobody may write), all in one message; C01: check mode
    refuses them as the real run does, and neither changes anything."""
    host = make_host(tmp_path, template_venv, "index", torch=False, venv=False,
                     components=["pytorch", "ml_packages", "runtime_env"])
    (tmp_path / "plain").write_text("a regular file\n")
    locked = tmp_path / "locked"
    locked.mkdir()
    set_vars(host, sparkforge_venv=str(tmp_path / "plain" / "venv"),
             runtime_env_profile_path=str(tmp_path / "plain" / "profile.d" / "sparkforge.sh"),
             sparkforge_report_dir=str(locked / "reports"))
    if subprocess.run(["chattr", "+i", str(locked)], check=False).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        before, status = snapshot(*watched(host) + [tmp_path / "plain", locked]), git_status()
        for extra in (["--check"], []):
            proc, _ = playbook(host, *extra)
            out = flat(proc.stdout)
            assert proc.returncode == 2, proc.stdout[-3000:]
            assert "sparkforge_venv=%s/plain/venv: its parent %s/plain is a regular file" % (tmp_path, tmp_path) \
                in out, proc.stdout[-3000:]
            assert ("runtime_env_profile_path=%s/plain/profile.d/sparkforge.sh: its parent %s/plain is a regular file"
                    % (tmp_path, tmp_path)) in out
            assert ("sparkforge_report_dir=%s/reports: its parent %s is not writable by this user"
                    % (locked, locked)) in out
            assert "nothing was changed" in out
            # The plan names the variable that set the index (pytorch_index_url here), not its default's.
            assert "PyTorch %s from the index file://%s/index (pytorch_index_url)" % (TORCH, tmp_path) in out
        assert snapshot(*watched(host) + [tmp_path / "plain", locked]) == before and git_status() == status
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("C02",), id="C02")])
def test_the_fleet_report_dir_under_a_file_is_refused_before_any_change(tmp_path, template_venv, rows):  # noqa: F811
    """C02: the fleet summary's directory under a regular file is refused in preflight, in check mode as in
    the real run, before any host changes (not after the install, as before)."""
    host = make_host(tmp_path, template_venv, "wheelhouse", torch=False, components=["pytorch"])
    torch_wheel(host["wheelhouse"], TORCH, "13.0")
    (tmp_path / "plain").write_text("a regular file\n")
    set_vars(host, sparkforge_fleet_report_dir=str(tmp_path / "plain" / "reports"))
    before, status = snapshot(*watched(host)), git_status()
    for extra in (["--check"], []):
        proc, _ = playbook(host, *extra)
        out = flat(proc.stdout)
        assert proc.returncode == 2, proc.stdout[-3000:]
        assert ("sparkforge_fleet_report_dir=%s/plain/reports: its parent %s/plain is a regular file"
                % (tmp_path, tmp_path)) in out, proc.stdout[-3000:]
    assert snapshot(*watched(host)) == before and git_status() == status


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("C03",), id="C03")])
def test_a_missing_profile_directory_is_created_by_the_real_run_as_check_mode_says(tmp_path, template_venv, rows):  # noqa: F811
    """C03: runtime_env_profile_path whose directory does not exist: check mode reports its creation
    (exit 0, nothing changed) and the real run creates it (exit 0): the two agree."""
    host = make_host(tmp_path, template_venv, "existing", components=["runtime_env"])
    profile = tmp_path / "new" / "profile.d" / "sparkforge.sh"
    set_vars(host, runtime_env_profile_path=str(profile))
    before = snapshot(*watched(host) + [tmp_path / "new"])
    proc, _ = playbook(host, "--check")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert task_status(proc.stdout, "Create the directory of the login-shell script") == "changed", proc.stdout[-3000:]
    assert snapshot(*watched(host) + [tmp_path / "new"]) == before
    proc, _ = playbook(host)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert profile.is_file()


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("R17",), id="R17")])
def test_a_distribution_the_cuda_map_does_not_know_is_refused_not_sent_elsewhere(tmp_path, template_venv, rows):  # noqa: F811
    """R17: the host's distribution (this machine's Debian) has no entry in sparkforge_cuda_distro_map and the
    plan installs the CUDA libraries: refused in preflight (check mode too) naming the distribution and the
    keys tried, where it was silently given Ubuntu 24.04's repository before."""
    host = make_host(tmp_path, template_venv, "index", torch=False, components=["cuda_libs", "pytorch"])
    set_vars(host, sparkforge_dev_libraries="always", sparkforge_cuda_distro_map={"Ubuntu-24.04": "ubuntu2404"})
    before, status = snapshot(*watched(host)), git_status()
    proc, _ = playbook(host, "--check")
    out = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert re.search(r"sparkforge_cuda_distro_map has no NVIDIA repository for \S+ [0-9.]+ \(tried \S+-[0-9.]+"
                     r"(, \S+-[0-9]+)?; it knows Ubuntu-24.04\), which cuda_libs install from", out), proc.stdout[-3000:]
    assert "nothing was changed" in out
    assert snapshot(*watched(host)) == before and git_status() == status
