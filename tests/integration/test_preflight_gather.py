"""Preflight reads the host and plans it in one module call (stack_plan's `gather`).

The facts it returns must be the ones gpu_facts and `setup` return, since the later roles read
ansible_facts.sparkforge, ansible_facts.architecture, ansible_facts.distribution and the Python
facts.  Both are run for real on this machine: setup from ansible-core, gpu_facts with a fake
nvidia-smi printing a GB10 in the real CSV format (no GPU here).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from helpers import COLLECTIONS, GB10, fake_smi, load_manifest, run_module

MANIFEST_KEYS = ("sparkforge_torch_releases", "sparkforge_triton_releases", "sparkforge_torch_arch_min_version",
                 "sparkforge_torch_arch_defaults", "sparkforge_torch_traps", "sparkforge_torch_fixes",
                 "sparkforge_cxx_min_compilers", "sparkforge_torch_wheel_archs", "sparkforge_ml_packages",
                 "sparkforge_ml_profiles", "sparkforge_ml_package_pins")
CHECKS = {"allow_x86_64": True, "supported_distributions": [{"distribution": "Debian", "versions": ["12"]}],
          "min_python": "3.10", "require_gpu": True, "min_driver_blackwell": "580", "min_ram_gib": 1,
          "min_ram_gib_source_build": 1, "min_disk_gib": 0, "min_disk_gib_source_build": 0}


def setup_facts():
    """What ansible-core's setup module returns here for the subsets preflight used to gather."""
    args = {"ANSIBLE_MODULE_ARGS": {"gather_subset": ["!all", "!min", "distribution", "python", "platform"]}}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(args, handle)
    try:
        out = subprocess.run([sys.executable, "-m", "ansible.modules.setup", handle.name], check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
    finally:
        os.unlink(handle.name)
    return dict((k[len("ansible_"):], v) for k, v in json.loads(out)["ansible_facts"].items())


def plan_args(tmp_path, **more):
    m = load_manifest()
    args = {"gather": {"nvidia_smi": fake_smi(str(tmp_path), "spark", GB10), "disk_paths": [str(tmp_path / "build")],
                       "platforms": m["sparkforge_gpu_platforms"]},
            "host": {"name": "spark"}, "checks": dict(CHECKS, build_dir=str(tmp_path / "build")),
            "settings": {"components": ["cuda_libs", "cusparselt", "pytorch"], "torch_version": "latest",
                         "torch_source": "source", "cuda_arch_list": "", "ml_profile": "minimal",
                         "index_url": "https://download.pytorch.org/whl/cu130", "dev_libraries": "auto"},
            "manifest": dict((k, m[k]) for k in MANIFEST_KEYS),
            "sources": {"cuda_repo_url": "https://mirror.example/cuda", "cuda_keyring_version": "1.1-1",
                        "cuda_keyring_sha256": "ab" * 32, "cusparselt_version": m["sparkforge_cusparselt_version"],
                        "cusparselt_base_url": "https://mirror.example/cusparselt/{version}/",
                        "pytorch_repo": "https://mirror.example/pytorch.git", "variables": {}},
            "platform_maps": {"cuda_distro_map": {"Debian-12": "debian12"},
                              "cuda_repo_arch_map": m["sparkforge_cuda_repo_arch_map"],
                              "cuda_deb_arch_map": m["sparkforge_cuda_deb_arch_map"],
                              "cusparselt_sha256": m["sparkforge_cusparselt_sha256"]},
            "probe_sources": False}
    args.update(more)
    return args


def test_one_call_returns_the_facts_of_gpu_facts_and_setup_and_plans_with_them(tmp_path):
    args = plan_args(tmp_path)
    result, rc = run_module("stack_plan", args)
    assert rc == 0, result
    facts = result["ansible_facts"]
    # The same facts gpu_facts returns for the same nvidia-smi and disk path.
    gpu, rc = run_module("gpu_facts", {"nvidia_smi": args["gather"]["nvidia_smi"], "required": False,
                                       "disk_paths": args["gather"]["disk_paths"],
                                       "platforms": args["gather"]["platforms"]})
    assert rc == 0, gpu
    ours, theirs = dict(facts["sparkforge"]), dict(gpu["ansible_facts"]["sparkforge"])
    for d in (ours, theirs):  # free space and available RAM move between two reads
        d.pop("disk")
        d["memory"].pop("available_mib")
    assert ours == theirs
    assert facts["sparkforge"]["platform_class"] == "dgx_spark"
    # ... and what setup returns, for every key it returns.
    expected = setup_facts()
    for key in ("distribution", "distribution_version", "distribution_release", "distribution_major_version",
                "os_family", "architecture", "python_version", "machine", "system"):
        assert facts[key] == expected[key], key
    assert facts["python"]["version"] == expected["python"]["version"]
    assert facts["python"]["executable"] == sys.executable
    # The plan is this host's: the host facts were filled in from what was read.
    assert result["plan"]["torch"]["source"] == "source"
    arch = facts["architecture"]
    deb_arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(arch, arch)
    # Debian 12 reports its point release (12.11): the map's Debian-12 matches by major (issue 33).
    major = facts["distribution_version"].split(".")[0]
    distro = "debian12" if (facts["distribution"], major) == ("Debian", "12") else "ubuntu2404"
    urls = [s["url"] for s in result["plan"]["sources"] if s["component"] == "cusparselt"]
    assert urls and all(distro in u and deb_arch in u for u in urls), urls


def test_the_maps_fill_the_repository_names_and_the_pinned_installer_sha256():
    sys.path.insert(0, COLLECTIONS)
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.sources import fill_platform_names
    m = load_manifest()
    maps = {"cuda_distro_map": m["sparkforge_cuda_distro_map"], "cuda_repo_arch_map": m["sparkforge_cuda_repo_arch_map"],
            "cuda_deb_arch_map": m["sparkforge_cuda_deb_arch_map"], "cusparselt_sha256": m["sparkforge_cusparselt_sha256"]}
    version = m["sparkforge_cusparselt_version"]
    spark = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "aarch64"}
    got = fill_platform_names({"cusparselt_version": version}, spark, maps)
    pinned = m["sparkforge_cusparselt_sha256"].get(version, {}).get("ubuntu2404", {}).get("arm64", "")
    assert (got["cuda_distro"], got["cuda_repo_arch"], got["deb_arch"], got["cusparselt_sha256"]) == \
        ("ubuntu2404", "sbsa", "arm64", pinned)
    # Given values win (an inventory that names its mirror's layout); an unknown OS gets no name (the plan
    # refuses it where it installs from NVIDIA's repository: no silent Ubuntu 24.04, issue 33).
    got = fill_platform_names({"cuda_distro": "rhel9", "cusparselt_version": version, "cusparselt_sha256": ""},
                              dict(spark, distribution="Rocky"), maps)
    assert (got["cuda_distro"], got["cusparselt_sha256"]) == ("rhel9", "")
    assert fill_platform_names({}, dict(spark, distribution="Rocky"), maps)["cuda_distro"] == ""
    assert fill_platform_names({}, dict(spark, distribution="Debian", distribution_version="12.11"),
                               maps)["cuda_distro"] == "debian12"
    # What preflight passes when the inventory sets no name (an empty value) is filled from the maps;
    # cuSPARSELt's distro follows the repository's unless it is set on its own (cusparselt_distro).
    got = fill_platform_names({"cuda_distro": "", "cuda_repo_arch": "", "cusparselt_distro": "", "cusparselt_version":
                               version}, spark, maps)
    assert (got["cuda_distro"], got["cuda_repo_arch"], got["cusparselt_distro"]) == ("ubuntu2404", "sbsa", "ubuntu2404")
    got = fill_platform_names({"cuda_distro": "ubuntu2204", "cusparselt_distro": "ubuntu2404", "cusparselt_version":
                               version}, spark, maps)
    assert (got["cuda_distro"], got["cusparselt_distro"], got["cusparselt_sha256"]) == ("ubuntu2204", "ubuntu2404",
                                                                                        pinned)


def test_facts_and_gather_together_or_neither_is_refused(tmp_path):
    args = plan_args(tmp_path)
    both, rc = run_module("stack_plan", dict(args, facts={"gpus": []}))
    assert rc != 0 and "mutually exclusive" in both["msg"], both
    args.pop("gather")
    neither, rc = run_module("stack_plan", args)
    assert rc != 0 and "one of the following is required" in neither["msg"], neither


def test_bad_gather_settings_are_refused_with_what_is_wrong(tmp_path):
    args = plan_args(tmp_path)
    for gather, words in (({"nvidia_smi": "x", "disks": ["/"]}, "unknown key(s) disks"),
                          ({"timeout": 0}, "gather.timeout must be"),
                          ({"disk_paths": "/opt"}, "gather.disk_paths must be a list"),
                          ({"disk_paths": []}, "gather.platforms is required"),
                          # The GPU table is the caller's input: refused though the GPU is optional here.
                          ({"platforms": {"gb10": {"match": "GB10"}}},
                           "sparkforge_gpu_platforms.gb10: class must be a platform class name"),
                          ({"platforms": {"gb10": {"match": "GB10(", "class": "dgx_spark"}}},
                           "sparkforge_gpu_platforms.gb10: match 'GB10(' is not a regular expression")):
        result, rc = run_module("stack_plan", dict(args, gather=gather))
        assert rc != 0 and words in result["msg"], (gather, result)


def test_gpu_facts_refuses_a_gpu_table_that_cannot_classify_in_check_mode_too(tmp_path):
    """The table is the caller's input: refused before nvidia-smi is read, whether or not the GPU is required."""
    smi = fake_smi(str(tmp_path), "spark", GB10)
    for check_mode in (False, True):
        result, rc = run_module("gpu_facts", {"nvidia_smi": smi, "required": False,
                                              "platforms": {"gb10": {"match": "GB10", "class": "DGX Spark"}}},
                                check_mode=check_mode)
        assert rc != 0 and result["failed"], result
        assert "sparkforge_gpu_platforms.gb10: class must be a platform class name" in result["msg"]
        assert "ansible_facts" not in result
    result, rc = run_module("gpu_facts", {"nvidia_smi": smi})
    # Without its action plugin (which passes the manifest's table) the module names what is missing.
    assert rc != 0 and "platforms is missing" in result["msg"], result


def _as_nobody():
    """The argv prefix that runs a command as uid 65534 (setpriv, as root), or None where it cannot."""
    setpriv = "/usr/bin/setpriv"
    if os.geteuid() != 0 or not os.path.exists(setpriv) or not os.path.exists("/usr/bin/python3"):
        return None
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run(prefix + [sys.executable, "-c", "import ansible, os; print(os.geteuid())"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    return prefix if probe.stdout.strip() == "65534" else None


@pytest.mark.parametrize("row_id", [pytest.param("E05", id="E05")])
def test_a_user_who_cannot_become_root_is_refused_by_the_real_module(row_id):
    """The module run as another user (uid 65534, as a connection without become would run it): the plan needs
    root for runtime_env, so the host has a `root` problem naming that user, in check mode too."""
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("needs root and setpriv to run the module as another user")
    # Where that user can read (pytest's own temporary directories are its user's alone).
    tmp_path = pathlib.Path(tempfile.mkdtemp(prefix="sparkforge-nobody-"))
    tmp_path.chmod(0o755)
    try:
        _refused_as_nobody(prefix, tmp_path)
    finally:
        shutil.rmtree(str(tmp_path))


def _refused_as_nobody(prefix, tmp_path):
    args = plan_args(tmp_path)
    # The fake nvidia-smi with a python that user may run (this venv's may live in a directory of root's alone).
    args["gather"]["nvidia_smi"] = fake_smi(str(tmp_path), "spark", GB10, python="/usr/bin/python3")
    for name in os.listdir(str(tmp_path)):
        (tmp_path / name).chmod(0o755)
    args["settings"]["components"] = ["pytorch", "runtime_env"]
    args["manifest"]["sparkforge_root_needs"] = load_manifest()["sparkforge_root_needs"]
    for check_mode in (False, True):
        args_file = tmp_path / ("args-%s.json" % check_mode)
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(
            args, _ansible_check_mode=check_mode, _ansible_tmpdir=str(tmp_path))}))
        args_file.chmod(0o644)
        proc = subprocess.run(prefix + [sys.executable, os.path.join(COLLECTIONS, "ansible_collections", "sparkforge",
                                                                     "stack", "plugins", "modules", "stack_plan.py"),
                                        str(args_file)],
                              env=dict(os.environ, PYTHONPATH=COLLECTIONS, HOME=str(tmp_path)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=False)
        assert proc.stdout.strip(), proc.stderr[-2000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["ansible_facts"]["sparkforge"]["user"]["uid"] == 65534, result
        messages = [p["message"] for p in result["problems"] if p["check"] == "root"]
        assert len(messages) == 1 and "runtime_env (" in messages[0] and "(uid 65534)" in messages[0], result
        assert "ansible_become: true" in messages[0] and not result["ready"]
