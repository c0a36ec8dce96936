# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import subprocess

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.build import torch_build as tb, torch_fixes
from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import GIB, JobError
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import shared_manifest

M = copy.deepcopy(shared_manifest())  # this module's tables are handed to the code under test
RELEASES = M["sparkforge_torch_releases"]
DATA = {
    "arch_min_version": M["sparkforge_torch_arch_min_version"],
    "arch_defaults": M["sparkforge_torch_arch_defaults"],
    "traps": M["sparkforge_torch_traps"],
}
FIXES = M["sparkforge_torch_fixes"]


def plan(requested, version, platform_class="generic", caps=None):
    return tb.plan_arch_list(requested, version, RELEASES[version], platform_class, caps or [], DATA, FIXES)


# ------------------------------------------------------------ manifest data

def test_manifest_has_seed_and_newest_releases_with_pairings():
    assert RELEASES["2.9.1"]["torchvision"] == "0.24.1"
    assert RELEASES["2.9.1"]["torchaudio"] == "2.9.1"
    assert RELEASES["2.9.1"]["triton"] == "3.5.1"
    assert RELEASES["2.12.0"]["triton"] == "3.7.0" and RELEASES["2.12.0"]["torchvision"] == "0.27.0"
    # torchaudio's last release is 2.11.0: later torch releases pair with it.
    assert [RELEASES[v]["torchaudio"] for v in ("2.12.0", "2.13.0", "2.14.0")] == ["2.11.0"] * 3
    for version, entry in RELEASES.items():
        for key in ("triton", "torchvision", "torchaudio", "good_for", "traps", "fixes"):
            assert key in entry, (version, key)
        for fix in entry["fixes"]:
            assert fix in FIXES
        for trap in entry["traps"]:
            assert trap in DATA["traps"]


# ------------------------------------------------------------ arch list parsing / validation

@pytest.mark.parametrize("text,expected", [
    ("8.0;9.0;10.0;11.0;12.0+PTX", "8.0;9.0;10.0;11.0;12.0+PTX"),
    ("12.0 9.0", "9.0;12.0"),
    ("9.0a,9.0", "9.0;9.0a"),
    (["12.0", "12.0+PTX"], "12.0+PTX"),
])
def test_parse_and_format(text, expected):
    assert arch.to_torch(arch.parse_list(text)) == expected


@pytest.mark.parametrize("bad", ["sm_120", "12", "12.0b", "12.0+ptx", "compute_90"])
def test_parse_rejects_non_names(bad):
    # The plan names a text that is no arch name as its own error, from the one parser's message.
    with pytest.raises(tb.ArchListError) as err:
        tb.plan_arch_list(bad, "2.11.0", {}, "dgx_spark", [], DATA, {})
    assert bad in str(err.value)


# version, list, ok?, fragment of the message
ARCH_TABLE = [
    ("2.9.1", "12.0", True, None),
    ("2.9.1", "9.0;12.0+PTX", True, None),
    ("2.9.1", "12.0a", True, None),
    ("2.9.1", "11.0", True, None),
    ("2.9.1", "12.0f", False, "cpp_extension"),
    ("2.9.1", "12.1f", False, "family"),
    ("2.9.1", "13.0", False, "does not know the arch 13.0"),
    ("2.9.1", "12.1", True, None),      # fix exists for 2.9.1 -> allowed with the fix
    ("2.12.0", "12.1", True, None),     # no trap
    ("2.14.0", "12.1;12.0+PTX", True, None),
]


@pytest.mark.parametrize("version,text,ok,fragment", ARCH_TABLE)
def test_arch_table(version, text, ok, fragment):
    if ok:
        assert plan(text, version)["arch_list"] == arch.to_torch(arch.parse_list(text))
    else:
        with pytest.raises(tb.ArchListError) as err:
            plan(text, version)
        assert fragment in str(err.value)


def test_12_1_needs_2_8():
    errors = tb.arch_list_errors(arch.parse_list("12.1"), "2.7.1", DATA["arch_min_version"])
    assert len(errors) == 1 and "2.8.0" in errors[0] and "rejects" in errors[0]
    assert tb.arch_list_errors(arch.parse_list("12.1"), "2.8.0", DATA["arch_min_version"]) == []
    errors = tb.arch_list_errors(arch.parse_list("11.0;12.1"), "2.7.0", DATA["arch_min_version"])
    assert len(errors) == 2


def test_all_errors_reported_at_once():
    with pytest.raises(tb.ArchListError) as err:
        plan("12.0f;13.0", "2.9.1")
    assert "12.0f" in str(err.value) and "13.0" in str(err.value)


# ------------------------------------------------------------ the mem-eff trap

@pytest.mark.parametrize("version", ["2.9.0", "2.9.1", "2.10.0", "2.11.0"])
def test_trap_versions_apply_fix_with_12_1(version):
    result = plan("12.0;12.1", version)
    assert result["fixes_needed"] == ["mem_eff_sm121_guard"]


@pytest.mark.parametrize("version", ["2.12.0", "2.13.0", "2.14.0"])
def test_fixed_versions_need_no_fix(version):
    assert plan("12.1", version)["fixes_needed"] == []


def test_trap_without_fix_is_refused_with_explanation():
    release = dict(RELEASES["2.9.1"], fixes=[])
    with pytest.raises(tb.ArchListError) as err:
        tb.plan_arch_list("12.1", "2.9.1", release, "dgx_spark", ["12.1"], DATA, FIXES)
    msg = str(err.value)
    assert "__CUDA_ARCH__ <= 1200" in msg and "12.0" in msg and "no fix" in msg


def test_12_0_never_needs_the_fix():
    assert plan("8.0;9.0;10.0;11.0;12.0+PTX", "2.9.1")["fixes_needed"] == []


# ------------------------------------------------------------ default arch list

@pytest.mark.parametrize("version,klass,caps,expected", [
    ("2.9.1", "dgx_spark", ["12.1"], "12.0"),      # trap: 12.0 SASS runs on GB10
    ("2.10.0", "dgx_spark", ["12.1"], "12.0"),
    ("2.12.0", "dgx_spark", ["12.1"], "12.1"),     # fixed upstream
    ("2.9.1", "gh200", ["9.0"], "9.0"),
    ("2.9.1", "blackwell_rtx", ["12.0"], "12.0"),
    ("2.9.1", "none", [], "8.0;9.0;10.0;11.0;12.0+PTX"),
    ("2.9.1", "generic", ["8.6"], "8.6"),
    ("2.9.1", "mixed", ["9.0", "12.1"], "9.0;12.0"),
])
def test_default_arch_list(version, klass, caps, expected):
    result = plan(None, version, klass, caps)
    assert result["arch_list"] == expected
    assert result["fixes_needed"] == []


def _newest(versions):
    return max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))


# The newest release of the data, whatever `sparkforge versions --write` last added: the tests below are rules
# against the table, so a new release leaves them green.
NEWEST = _newest(RELEASES)


def test_default_version_counts_patch_releases():
    """Patch releases count: 2.14.1 is newer than 2.14.0 and 2.9.1 (not a string comparison)."""
    entry = dict(RELEASES["2.9.1"], good_for=["gh200"], unconfirmed=[])
    releases = {"2.9.1": entry, "2.14.0": entry, "2.14.1": entry}
    assert tb.default_version(releases, "gh200") == "2.14.1"


def test_default_version_is_newest_good_for_class():
    """The newest release good only for gh200: gh200 gets it, dgx_spark the newest confirmed one before it."""
    releases = dict(RELEASES, **{NEWEST: dict(RELEASES[NEWEST], good_for=["gh200"], unconfirmed=[])})
    assert tb.default_version(releases, "gh200") == NEWEST
    assert tb.default_version(releases, None) == NEWEST
    spark = _newest(v for v, e in RELEASES.items()
                    if v != NEWEST and "dgx_spark" in e["good_for"] and not e.get("unconfirmed"))
    assert tb.default_version(releases, "dgx_spark") == spark
    with pytest.raises(JobError):
        tb.default_version(RELEASES, "unknown_class")


def test_default_version_respects_the_wheels_python_floor():
    """A release whose wheels require a newer Python than the host's (torch 2.15.0: >= 3.11, the data's
    `wheels`) is never `latest` there; every release the default skips for it has such a floor."""
    assert RELEASES["2.15.0"]["wheels"]["aarch64"]["requires_python"] == ">=3.11"
    for python in ("3.10", "3.12"):
        chosen = tb.default_version(RELEASES, "dgx_spark", python)
        assert tb.python_allowed(RELEASES[chosen], python)
        skipped = [v for v, e in RELEASES.items() if "dgx_spark" in e["good_for"] and not e.get("unconfirmed")
                   and _newest([v, chosen]) == v and v != chosen]
        assert all(not tb.python_allowed(RELEASES[v], python) for v in skipped), (python, skipped)
    assert tb.default_version(RELEASES, "dgx_spark", "3.10") != "2.15.0"
    assert tb.python_allowed({}, "3.8")  # nothing recorded: no opinion


def test_default_version_skips_unconfirmed_pairings():
    """`latest` never lands on an entry whose pairings nobody checked; pinning it still works."""
    draft_version = "%d.0.0" % (int(NEWEST.split(".")[0]) + 1)  # newer than anything in the data
    draft = dict(RELEASES["2.14.0"], triton="3.9.0", unconfirmed=["triton"])
    releases = dict(RELEASES, **{draft_version: draft})
    assert tb.default_version(releases, "gh200") == tb.default_version(RELEASES, "gh200")
    only_draft = {draft_version: draft}
    with pytest.raises(JobError) as err:
        tb.default_version(only_draft, "gh200")
    assert "unconfirmed" in str(err.value) and draft_version in str(err.value)


# ------------------------------------------------------------ fix selection

def test_fix_selection_by_version():
    assert tb.select_fixes(RELEASES["2.9.1"], ["mem_eff_sm121_guard"], FIXES) == ["mem_eff_sm121_guard"]
    assert tb.select_fixes(RELEASES["2.13.0"], [], FIXES) == []
    with pytest.raises(torch_fixes.FixError) as err:
        tb.select_fixes(RELEASES["2.13.0"], [], FIXES, extra=["mem_eff_sm121_guard"])
    assert "not listed for this release" in str(err.value)
    with pytest.raises(torch_fixes.FixError):
        tb.select_fixes(RELEASES["2.9.1"], [], FIXES, extra=["no_such_fix"])


# ------------------------------------------------------------ features / env

def env_for(machine="aarch64", features=None, blas="auto", cusparselt=None, extra_env=None, caller_env=None):
    resolved = tb.resolve_features(features, machine, cusparselt)
    return tb.build_env({
        "arch_list": "12.0", "features": resolved, "machine": machine, "blas": blas,
        "cuda_home": "/usr/local/cuda", "venv_bin": "/opt/venv/bin", "cusparselt": cusparselt,
        "build_version": "2.9.1", "build_number": 1, "jobs": 3, "extra_env": extra_env,
        "caller_env": caller_env or {},
    })


def test_env_defaults_aarch64():
    env = env_for()
    assert env["BLAS"] == "OpenBLAS" and env["USE_MKL"] == "0"
    assert env["USE_MKLDNN"] == "0"
    assert env["USE_CUDA"] == "1" and env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["TORCH_CUDA_ARCH_LIST"] == "12.0"
    assert env["PYTORCH_BUILD_VERSION"] == "2.9.1" and env["PYTORCH_BUILD_NUMBER"] == "1"
    assert env["MAX_JOBS"] == "3"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"
    assert env["PATH"].split(":")[:2] == ["/opt/venv/bin", "/usr/local/cuda/bin"]
    assert env["USE_CUSPARSELT"] == "0"   # not found -> off
    assert "CUSPARSELT_ROOT_DIR" not in env


def test_env_x86_default_mkl_and_mkldnn():
    env = env_for(machine="x86_64")
    assert env["BLAS"] == "MKL" and env["USE_MKLDNN"] == "1"


def test_mkl_refused_on_aarch64():
    with pytest.raises(JobError) as err:
        env_for(blas="MKL")
    assert "OpenBLAS" in str(err.value)


@pytest.mark.parametrize("feature,var", sorted((k, v[0]) for k, v in tb.FEATURES.items()
                                               if k not in ("cuda", "distributed")))
def test_each_feature_maps_to_its_variable(feature, var):
    base = {"nccl": True, "mkldnn": True}
    on = env_for(features=dict(base, **{feature: True}), cusparselt={"root": "/usr", "include": "/i", "library": "/l/x.so"})
    off = env_for(features=dict(base, **{feature: False}), cusparselt={"root": "/usr", "include": "/i", "library": "/l/x.so"})
    if feature == "system_nccl":
        assert on[var] == "1" and off[var] == "0"
    elif feature == "nccl":
        assert on[var] == "1"
        with pytest.raises(JobError):
            env_for(features={"nccl": False, "system_nccl": True})
    else:
        assert on[var] == "1" and off[var] == "0"


def test_cuda_off_turns_off_cuda_features():
    env = env_for(features={"cuda": False})
    assert env["USE_CUDA"] == "0" and env["USE_CUDNN"] == "0" and env["USE_FLASH_ATTENTION"] == "0"
    assert "CUDA_HOME" not in env and env["LD_LIBRARY_PATH"] == ""
    assert "/usr/local/cuda/bin" not in env["PATH"]


def test_cusparselt_env():
    found = {"root": "/usr", "include": "/usr/include/libcusparseLt/13",
             "library": "/usr/lib/aarch64-linux-gnu/libcusparseLt/13/libcusparseLt.so"}
    env = env_for(cusparselt=found)
    assert env["USE_CUSPARSELT"] == "1"
    assert env["CUSPARSELT_INCLUDE_DIR"] == found["include"]
    assert env["CUSPARSELT_LIBRARY"] == found["library"]
    assert env["LD_LIBRARY_PATH"].endswith("/usr/lib/aarch64-linux-gnu/libcusparseLt/13")
    with pytest.raises(JobError) as err:
        env_for(features={"cusparselt": True})
    assert "libcusparselt0-dev-cuda-13" in str(err.value)


def test_find_cusparselt(tmp_path):
    assert tb.find_cusparselt("aarch64", 13, root=str(tmp_path)) is None
    inc = tmp_path / "usr/include/libcusparseLt/13"
    lib = tmp_path / "usr/lib/aarch64-linux-gnu/libcusparseLt/13"
    inc.mkdir(parents=True)
    lib.mkdir(parents=True)
    (inc / "cusparseLt.h").write_text("")
    (lib / "libcusparseLt.so").write_text("")
    found = tb.find_cusparselt("aarch64", 13, root=str(tmp_path))
    assert found["include"] == str(inc) and found["library"] == str(lib / "libcusparseLt.so")


def test_env_is_clean_and_extra_env_wins():
    caller = {"https_proxy": "http://p:3128", "LD_LIBRARY_PATH": "/evil", "CFLAGS": "-O0"}
    env = env_for(extra_env={"USE_KINETO": "0", "FOO": 1}, caller_env=caller)
    assert env["USE_KINETO"] == "0" and env["FOO"] == "1"
    assert env["https_proxy"] == "http://p:3128"
    assert "CFLAGS" not in env and "/evil" not in env["LD_LIBRARY_PATH"]
    assert all(isinstance(v, str) for v in env.values())


def test_unknown_feature_refused():
    with pytest.raises(JobError) as err:
        tb.resolve_features({"flash": True}, "aarch64", None)
    assert "flash_attention" in str(err.value)


# ------------------------------------------------------------ jobs

def test_jobs_formula(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: %d kB\nMemAvailable: %d kB\n" % (128 * 1024 * 1024, 100 * 1024 * 1024))
    jobs, why = tb.plan_jobs("auto", meminfo_path=str(meminfo))
    cores = os.cpu_count()
    assert jobs == min(cores, int((100 - tb.RESERVE_GIB) // tb.MEM_PER_JOB_GIB))
    assert "4.0 GiB per job" in why
    meminfo.write_text("MemTotal: %d kB\nMemAvailable: %d kB\n" % (16 * 1024 * 1024, 14 * 1024 * 1024))
    assert tb.plan_jobs("auto", meminfo_path=str(meminfo))[0] == min(cores, 2)
    assert tb.plan_jobs(7)[0] == 7
    with pytest.raises(JobError):
        tb.plan_jobs("lots")


def test_auto_jobs_gb10_figure():
    from ansible_collections.sparkforge.stack.plugins.module_utils.build.build_common import auto_jobs
    assert auto_jobs(20, 120 * GIB, tb.MEM_PER_JOB_GIB, tb.RESERVE_GIB) == 20
    assert auto_jobs(72, 120 * GIB, tb.MEM_PER_JOB_GIB, tb.RESERVE_GIB) == 29


# ------------------------------------------------------------ cache key

BASE_INPUTS = {
    "commit": "a" * 40, "version": "2.9.1", "build_number": 1, "arch_list": "12.0",
    "features": tb.resolve_features({}, "aarch64", None),
    "env": tb.output_env(env_for()), "fixes": {}, "patches": {},
    "toolchain": {"nvcc": "13.0.88", "gcc": "13.2"}, "python": "3.12.3",
}

CHANGES = [
    ("commit", "b" * 40),
    ("version", "2.9.0"),
    ("build_number", 2),
    ("arch_list", "12.0;12.1"),
    ("features", dict(BASE_INPUTS["features"], flash_attention=False)),
    ("env", dict(BASE_INPUTS["env"], USE_KINETO="0")),
    ("fixes", {"mem_eff_sm121_guard": "f" * 64}),
    ("patches", {"x.patch": "e" * 64}),
    ("toolchain", {"nvcc": "13.1.0", "gcc": "13.2"}),
    ("python", "3.11.9"),
]


@pytest.mark.parametrize("field,value", CHANGES)
def test_each_input_changes_the_key(field, value):
    changed = dict(BASE_INPUTS, **{field: value})
    assert tb.build_key(changed) != tb.build_key(BASE_INPUTS)


def test_irrelevant_inputs_do_not_change_the_key():
    key = tb.build_key(BASE_INPUTS)
    env = env_for()
    env2 = dict(env, MAX_JOBS="17", CMAKE_BUILD_PARALLEL_LEVEL="17", https_proxy="http://x", HOME="/home/u",
                TMPDIR="/var/tmp", CCACHE_DIR="/c", CMAKE_CXX_COMPILER_LAUNCHER="ccache")
    assert tb.build_key(dict(BASE_INPUTS, env=tb.output_env(env2))) == key
    assert tb.build_key(dict(BASE_INPUTS, unrelated="x")) == key
    # dict order never matters
    reordered = dict(reversed(list(BASE_INPUTS.items())))
    assert tb.build_key(reordered) == key


def test_key_requires_every_input():
    broken = dict(BASE_INPUTS)
    del broken["toolchain"]
    with pytest.raises(JobError):
        tb.build_key(broken)


# ------------------------------------------------------------ fixes / patches on a real tree

GUARD = "#ifdef __CUDA_ARCH__\n#if __CUDA_ARCH__ >= 800\n#if __CUDA_ARCH__ <= 1200\n  run();\n#endif\n#endif\n#endif\n"
KDIR = "aten/src/ATen/native/transformers/cuda/mem_eff_attention/kernels"


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / KDIR).mkdir(parents=True)
    (src / KDIR / "cutlassF_f16_aligned.cu").write_text(GUARD + GUARD)
    (src / KDIR / "cutlassB_f16_aligned_k64.cu").write_text(GUARD)
    (src / "README").write_text("line one\nline two\n")
    subprocess.check_call(["git", "init", "-q", str(src)])
    subprocess.check_call(["git", "-C", str(src), "add", "-A"])
    subprocess.check_call(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "i"])
    return src


def test_mem_eff_fix_applies_once(tree):
    report = torch_fixes.apply_all(str(tree), ["mem_eff_sm121_guard"], FIXES, [])
    assert report[0]["state"] == "applied" and len(report[0]["files"]) == 2
    text = (tree / KDIR / "cutlassF_f16_aligned.cu").read_text()
    assert text.count("<= 1210") == 2 and "<= 1200" not in text
    again = torch_fixes.apply_all(str(tree), ["mem_eff_sm121_guard"], FIXES, [])
    assert again[0]["state"] == "already"


def test_fix_and_marker_writes_are_renamed_in_not_rewritten_in_place(tree):
    """Issue 42: a run killed mid-write must leave the old file or the new, never a half one the next run trusts
    (a half marker reads as "nothing applied" and the fixes would be applied twice).  Each write is a new file
    renamed over the old name: the name's inode changes, the file's mode is kept, no temp file is left."""
    cu = tree / KDIR / "cutlassF_f16_aligned.cu"
    os.chmod(str(cu), 0o755)
    before = os.stat(str(cu)).st_ino
    torch_fixes.apply_all(str(tree), ["mem_eff_sm121_guard"], FIXES, [])
    assert os.stat(str(cu)).st_ino != before and os.stat(str(cu)).st_mode & 0o777 == 0o755
    marker = tree / torch_fixes.MARKER
    first = os.stat(str(marker)).st_ino
    torch_fixes.apply_edit(str(tree), {"files": "README", "old": "line two\n", "new": "line 2\n"})
    torch_fixes._write_applied(str(tree), dict(torch_fixes.read_applied(str(tree)), extra="x"))
    assert os.stat(str(marker)).st_ino != first and torch_fixes.read_applied(str(tree))["extra"] == "x"
    assert not [n for n in os.listdir(str(tree)) if n.startswith(".") and n not in (".git", torch_fixes.MARKER)]


def test_fix_check_only_changes_nothing(tree):
    before = (tree / KDIR / "cutlassF_f16_aligned.cu").read_text()
    report = torch_fixes.apply_all(str(tree), ["mem_eff_sm121_guard"], FIXES, [], check_only=True)
    assert report[0]["state"] == "would apply"
    assert (tree / KDIR / "cutlassF_f16_aligned.cu").read_text() == before


def test_fix_fails_when_guard_missing_all_or_nothing(tree):
    (tree / KDIR / "cutlassB_f16_aligned_k64.cu").write_text("// regenerated\n")
    with pytest.raises(torch_fixes.FixError) as err:
        torch_fixes.apply_all(str(tree), ["mem_eff_sm121_guard"], FIXES, [])
    assert "cutlassB_f16_aligned_k64.cu" in str(err.value)
    assert "<= 1200" in (tree / KDIR / "cutlassF_f16_aligned.cu").read_text()  # nothing applied


def test_exact_once_edit(tree):
    edit = {"files": "README", "old": "line two\n", "new": "line 2\n"}
    assert torch_fixes.apply_edit(str(tree), edit) == ["README"]
    with pytest.raises(torch_fixes.FixError) as err:
        torch_fixes.check_edit(str(tree), edit)
    assert "exactly once, found 0" in str(err.value)
    (tree / "README").write_text("x\nx\n")
    with pytest.raises(torch_fixes.FixError) as err:
        torch_fixes.check_edit(str(tree), {"files": "README", "old": "x\n", "new": "y\n"})
    assert "found 2" in str(err.value)
    with pytest.raises(torch_fixes.FixError):
        torch_fixes.check_edit(str(tree), {"files": "../etc/passwd", "old": "a", "new": "b"})


def test_user_patch_check_and_failure_names_file_and_hunk(tree, tmp_path):
    good = tmp_path / "good.patch"
    good.write_text("--- a/README\n+++ b/README\n@@ -1,2 +1,2 @@\n line one\n-line two\n+line 2\n")
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/README\n+++ b/README\n@@ -1,2 +1,2 @@\n line one\n-line zwei\n+line 2\n")
    with pytest.raises(torch_fixes.FixError) as err:
        torch_fixes.apply_all(str(tree), [], FIXES, [str(bad)])
    assert "file README, hunk @@ -1,2 +1,2 @@" in str(err.value)
    report = torch_fixes.apply_all(str(tree), [], FIXES, [str(good)])
    assert report[0]["state"] == "applied"
    assert (tree / "README").read_text() == "line one\nline 2\n"
    assert torch_fixes.apply_all(str(tree), [], FIXES, [str(good)])[0]["state"] == "already"


def test_read_build_requirements(tmp_path):
    (tmp_path / "requirements.txt").write_text("# c\nsetuptools>=70\nnumpy\npyyaml\n-r other.txt\ntyping_extensions\n")
    reqs = tb.read_build_requirements(str(tmp_path))
    assert reqs == ["setuptools", "wheel", "numpy", "pyyaml", "typing_extensions"]
    (tmp_path / "requirements-build.txt").write_text("ninja\ncmake\n")
    assert tb.read_build_requirements(str(tmp_path)) == ["setuptools", "wheel", "ninja", "cmake"]
