# -*- coding: utf-8 -*-
"""Issue 42: "provisioned" is a proof.  The comparison runs its probe in a real venv (made here, with
dist-info directories written as pip writes them) and compares with a plan as preflight makes it."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import packaging
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import proof
from ansible_collections.sparkforge.stack.plugins.module_utils.host import env_file

PLAN = {
    "torch": {"version": "2.11.0", "source": "index", "index_url": "https://download.pytorch.org/whl/cu130"},
    "torchvision": "0.26.0", "torchaudio": "2.11.0",
    "ml_packages": [
        {"name": "tokenizers", "requirement": "tokenizers==0.21.0", "method": "wheel", "optional": False},
        {"name": "safetensors", "requirement": "safetensors>=0.4,<1", "method": "wheel", "optional": False},
        {"name": "flash_attn", "requirement": "flash_attn", "method": "source", "optional": True},
        {"name": "bitsandbytes", "requirement": "bitsandbytes", "method": "skip", "optional": False},
    ],
}
ALL = ["pytorch", "torch_domains", "ml_packages"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A venv without pip; the packaging library linked in, as pip vendors it in a real one."""
    root = tmp_path_factory.mktemp("proof") / "venv"
    subprocess.check_call([sys.executable, "-m", "venv", "--without-pip", str(root)])
    site = subprocess.check_output([str(root / "bin" / "python"), "-I", "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    os.symlink(os.path.dirname(packaging.__file__), os.path.join(site, "packaging"))
    return root, site


def install(site, name, version):
    """A dist-info directory as pip writes it (METADATA, INSTALLER), replacing an earlier version."""
    for entry in os.listdir(site):
        if entry.lower().startswith(name.replace("-", "_").lower() + "-") and entry.endswith(".dist-info"):
            for f in os.listdir(os.path.join(site, entry)):
                os.unlink(os.path.join(site, entry, f))
            os.rmdir(os.path.join(site, entry))
    info = os.path.join(site, "%s-%s.dist-info" % (name.replace("-", "_"), version))
    os.mkdir(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    with open(os.path.join(info, "INSTALLER"), "w") as f:
        f.write("pip\n")


def probe(root, want):
    out = subprocess.check_output([str(root / "bin" / "python"), "-I", "-c", proof.PROBE,
                                   json.dumps(proof.requirements(want))], text=True)
    return proof.parse_probe(out)


def test_the_planned_venv_is_provisioned_and_each_drift_is_named(venv):
    root, site = venv
    for name, version in [("torch", "2.11.0+cu130"), ("torchvision", "0.26.0+cu130"), ("torchaudio", "2.11.0+cu130"),
                          ("tokenizers", "0.21.0"), ("safetensors", "0.5.3")]:
        install(site, name, version)
    want = proof.expected(PLAN, ALL)
    # The optional and the skipped package are not part of the proof.
    assert [i["name"] for i in want["ml_packages"]] == ["tokenizers", "safetensors"]
    assert proof.state_of(proof.differences(want, probe(root, want))) == ("provisioned", None)

    # A pip install over torch (another CUDA build), a tokenizers that failed, a safetensors out of its range.
    install(site, "torch", "2.11.0+cu128")
    os.unlink(os.path.join(site, "tokenizers-0.21.0.dist-info", "METADATA"))
    os.unlink(os.path.join(site, "tokenizers-0.21.0.dist-info", "INSTALLER"))
    os.rmdir(os.path.join(site, "tokenizers-0.21.0.dist-info"))
    install(site, "safetensors", "1.0.0")
    diffs = proof.differences(want, probe(root, want))
    assert [(d["component"], d["package"], d["installed"]) for d in diffs] == [
        ("pytorch", "torch", "2.11.0+cu128"), ("ml_packages", "tokenizers", None),
        ("ml_packages", "safetensors", "1.0.0")]
    state, error = proof.state_of(diffs)
    assert state == "partial"
    assert "ml_packages: tokenizers not installed, plan tokenizers==0.21.0" in error
    assert "pytorch: torch 2.11.0+cu128 installed, plan 2.11.0+cu130 (CUDA 13.0)" in error


@pytest.mark.parametrize("components, packages", [
    (["pytorch"], ["torch"]),
    (["torch_domains"], ["torchaudio", "torchvision"]),
    (["ml_packages"], ["tokenizers", "safetensors"]),
    (["runtime_env", "verify"], []),
])
def test_only_the_components_of_the_run_are_compared(components, packages):
    diffs = proof.differences(proof.expected(PLAN, components), {"dists": {}, "satisfied": {}})
    assert [d["package"] for d in diffs] == packages


def test_a_release_differs_and_a_wheelhouse_torch_pins_no_local_tag():
    wheelhouse = dict(PLAN, torch={"version": "2.11.0", "source": "wheelhouse"})
    want = proof.expected(wheelhouse, ["pytorch"])
    assert proof.differences(want, {"dists": {"torch": "2.11.0+git1234"}}) == []
    assert [d["installed"] for d in proof.differences(want, {"dists": {"torch": "2.10.0"}})] == ["2.10.0"]


def test_without_a_packaging_library_a_required_package_must_at_least_be_there():
    want = proof.expected(PLAN, ["ml_packages"])
    found = {"dists": {"tokenizers": "0.1"}, "satisfied": {"tokenizers==0.21.0": None, "safetensors>=0.4,<1": None}}
    assert [d["package"] for d in proof.differences(want, found)] == ["safetensors"]


@pytest.mark.parametrize("stdout", ["", "hello\n", "[1, 2]\n"])
def test_a_probe_output_without_a_distribution_list_is_an_error(stdout):
    with pytest.raises(ValueError):
        proof.parse_probe(stdout)


def test_the_roles_resolved_rows_replace_the_plans_list():
    rows = [{"name": "einops", "requirement": "einops", "optional": False, "method": "wheel", "status": "failed"},
            {"name": "xformers", "requirement": "xformers", "optional": False, "method": "source", "status": "skipped"}]
    want = proof.expected(PLAN, ["ml_packages"], ml_packages=rows)
    assert want["ml_packages"] == [{"name": "einops", "requirement": "einops"}]
    assert proof.state_of(proof.differences(want, {"dists": {}, "satisfied": {"einops": False}}))[1] == \
        "ml_packages: einops not installed, plan einops"


def test_a_pip_install_over_torch_since_the_proof_is_drift_naming_both_versions(tmp_path):
    root = tmp_path / "venv"
    subprocess.check_call([sys.executable, "-m", "venv", "--without-pip", str(root)])
    site = subprocess.check_output([str(root / "bin" / "python"), "-I", "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
    install(site, "torch", "2.11.0+cu130")
    install(site, "Tokenizers", "0.21.0")
    want = proof.expected(PLAN, ["pytorch", "ml_packages"])
    record = proof.compared(want, probe(root, want))
    assert record == {"torch": "2.11.0+cu130", "tokenizers": "0.21.0", "safetensors": None}
    kept = {"torch": "2.11.0+cu130", "tokenizers": "0.21.0"}
    assert proof.drift(kept, probe(root, want)["dists"]) == []

    install(site, "torch", "2.10.0")
    assert [d["words"] for d in proof.drift(kept, probe(root, want)["dists"])] == [
        "torch 2.11.0+cu130 at the last provisioning, now 2.10.0"]


# The runtime profile: each file runtime_env wrote, read back as the shell reads its export lines.
ENV = {"TORCH_CUDA_ARCH_LIST": "9.0;12.1", "TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas",
       "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
                       st.text(st.characters(blacklist_characters="\n\r\x00", blacklist_categories=("Cs",)),
                               max_size=20), max_size=6))
def test_a_profile_as_the_role_writes_it_reads_back_to_its_variables(variables):
    """Any variables, quoted as the role's template quotes them (shell quoting: spaces, quotes, $), read back
    as written: the profile of a run is proven against the variables it was written from."""
    text = env_file.render(variables, comment="Ansible managed (sparkforge.stack.runtime_env)")
    assert proof.parse_profile(text) == variables
    assert proof.profile_differences(variables, {"/etc/profile.d/sparkforge.sh": text}) == []


def test_a_profile_edited_missing_or_with_a_stray_variable_is_named_per_variable():
    edited = env_file.render(dict(ENV, TORCH_CUDA_ARCH_LIST="8.0", EXTRA="1"))
    gone = dict(ENV)
    del gone["TRITON_PTXAS_PATH"]
    files = {"/p/sparkforge.sh": edited, "/v/bin/sparkforge-env.sh": None, "/q/sparkforge.sh": env_file.render(gone)}
    diffs = proof.profile_differences(ENV, files)
    assert [d["words"] for d in diffs] == [
        "runtime_env: /p/sparkforge.sh: EXTRA=1, not in the plan",
        "runtime_env: /p/sparkforge.sh: TORCH_CUDA_ARCH_LIST=8.0, plan 9.0;12.1",
        "runtime_env: /q/sparkforge.sh: TRITON_PTXAS_PATH unset, plan /usr/local/cuda/bin/ptxas",
        "runtime_env: /v/bin/sparkforge-env.sh is missing"]
    assert proof.state_of(diffs)[0] == "partial"
    # A line the shell cannot read (an unclosed quote) is not a variable of the plan.
    assert proof.profile_differences({}, {"/p": "export A='x\n"}) == [
        {"component": "runtime_env", "package": "/p", "planned": None, "installed": proof.UNREADABLE,
         "words": "runtime_env: /p: export A='x: a line the shell cannot read"}]


@pytest.mark.parametrize("report, words", [
    ({"passed": True, "failures": []}, []),
    ({"passed": False, "failures": ["matmul: wrong result", "sdpa: error", "a", "b"], "summary": "3/5"},
     ["verify: failed (matmul: wrong result; sdpa: error; a)"]),
    ({"passed": False, "summary": "no GPU"}, ["verify: failed (no GPU)"]),
    ({}, ["verify: failed (no reason given)"]),
    (None, ["verify: no report, though verify is a component of the run"]),
])
def test_verify_is_proven_only_by_a_report_that_passed(report, words):
    diffs = proof.verify_differences(report)
    assert [d["words"] for d in diffs] == words
    assert proof.state_of(diffs) == (("provisioned", None) if not words else ("partial", words[0]))


def test_a_profile_edited_since_the_proof_is_drift_naming_the_file_and_variable():
    recorded = {"/p/sparkforge.sh": dict(ENV), "/v/sparkforge-env.sh": dict(ENV)}
    same = env_file.render(ENV)
    assert proof.profile_drift(recorded, {"/p/sparkforge.sh": same, "/v/sparkforge-env.sh": same}) == []
    edited = env_file.render(dict(ENV, TORCH_CUDA_ARCH_LIST="8.0"))
    assert [d["words"] for d in proof.profile_drift(recorded, {"/p/sparkforge.sh": edited,
                                                               "/v/sparkforge-env.sh": None})] == [
        "/p/sparkforge.sh edited since the last provisioning: TORCH_CUDA_ARCH_LIST=8.0, last proof 9.0;12.1",
        "/v/sparkforge-env.sh written at the last provisioning, now missing"]
