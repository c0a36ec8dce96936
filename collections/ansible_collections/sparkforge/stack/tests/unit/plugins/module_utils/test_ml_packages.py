from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import ml_packages as mp

SPARK = {"arch": "aarch64", "platform_class": "dgx_spark", "cuda_major": 13}
GH200 = {"arch": "aarch64", "platform_class": "gh200", "cuda_major": 13}
X86 = {"arch": "x86_64", "platform_class": "hopper", "cuda_major": 13}


def plan_for(manifest, platform, **kwargs):
    return mp.resolve(manifest["sparkforge_ml_packages"], manifest["sparkforge_ml_profiles"],
                      manifest["sparkforge_ml_package_pins"], platform, **kwargs)


def by_name(plan):
    return dict((item["name"], item) for item in plan)


def test_every_profile_resolves_on_every_platform(manifest):
    for profile in ("minimal", "training", "inference", "all"):
        for platform in (SPARK, GH200, X86, {"arch": "x86_64", "platform_class": "none", "cuda_major": 12}):
            plan = plan_for(manifest, platform, profile=profile)
            assert plan, profile
            for item in plan:
                assert item["method"] in mp.METHODS


def test_all_profile_leaves_out_opt_in_packages(manifest):
    names = [item["name"] for item in plan_for(manifest, SPARK, profile="all")]
    assert "flash-attn" not in names
    assert "opencv-python" not in names and "torch" not in names
    assert "opencv-python-headless" in names and "deepspeed" in names


def test_flash_attn_is_experimental_source_on_cuda13_aarch64_only(manifest):
    spark = by_name(plan_for(manifest, SPARK, packages=["flash-attn"]))["flash-attn"]
    assert spark["method"] == "source" and spark["experimental"] is True
    assert spark["source"]["build_isolation"] is False
    assert "GCC 13" in spark["caveats"][0]
    x86 = by_name(plan_for(manifest, X86, packages=["flash_attn"]))["flash-attn"]
    assert x86["method"] == "source" and x86["experimental"] is False


def test_caveats_of_seed_004(manifest):
    plan = by_name(plan_for(manifest, SPARK, profile="all"))
    tok = plan["tokenizers"]
    assert tok["method"] == "wheel" and tok["fallback"] == "source"
    assert {"rustc", "cargo"} <= set(tok["source"]["prereqs"])
    bnb = plan["bitsandbytes"]
    assert bnb["method"] == "wheel" and bnb["fallback"] == "source" and bnb["optional"]
    ds = plan["deepspeed"]
    assert ds["method"] == "source" and ds["source"]["env"]["DS_BUILD_OPS"] == "1"
    assert ds["source"]["build_isolation"] is False
    assert plan["optimum-quanto"]["optional"] is True
    assert plan["xformers"]["method"] == "source"
    assert by_name(plan_for(manifest, X86, packages=["xformers"]))["xformers"]["method"] == "index"


def test_install_first_puts_tokenizers_before_transformers(manifest):
    names = [item["name"] for item in plan_for(manifest, SPARK, packages=["transformers"])]
    assert names.index("tokenizers") < names.index("transformers")
    assert "safetensors" in names


def test_pins_and_specifiers(manifest):
    plan = by_name(plan_for(manifest, SPARK, packages=["einops"]))
    assert plan["einops"]["requirement"] == "einops==" + manifest["sparkforge_ml_package_pins"]["einops"]
    assert mp.requirement_for("x", "") == "x"
    assert mp.requirement_for("x", None) == "x"
    assert mp.requirement_for("x", ">=1.0, <2") == "x>=1.0,<2"
    assert mp.requirement_for("x", "2.0") == "x==2.0"


def test_unknown_names_give_clear_errors(manifest):
    with pytest.raises(mp.MatrixError, match="unknown package.*nosuchpkg.*known: "):
        plan_for(manifest, SPARK, packages=["einops", "nosuchpkg"])
    with pytest.raises(mp.MatrixError, match="unknown profile 'huge'.*minimal"):
        plan_for(manifest, SPARK, profile="huge")
    with pytest.raises(mp.MatrixError, match="nothing selected"):
        plan_for(manifest, SPARK)


def test_rules_first_match_and_arch_aliases():
    matrix = {"p": {"methods": [
        {"when": {"arch": "arm64", "cuda_major": [12, 13]}, "method": "source"},
        {"when": {"platform_class": ["gh200"]}, "method": "skip", "reason": "r"},
        {"method": "wheel"}]}}
    assert mp.resolve(matrix, {}, {}, SPARK, packages=["p"])[0]["method"] == "source"
    assert mp.resolve(matrix, {}, {}, dict(GH200, cuda_major=11), packages=["p"])[0]["method"] == "skip"
    assert mp.resolve(matrix, {}, {}, X86, packages=["p"])[0]["method"] == "wheel"
    with pytest.raises(mp.MatrixError, match="unknown condition 'gpu'"):
        mp.resolve({"p": {"methods": [{"when": {"gpu": 1}, "method": "wheel"}]}}, {}, {}, X86, packages=["p"])
    with pytest.raises(mp.MatrixError, match="no rule"):
        mp.resolve({"p": {"methods": [{"when": {"arch": "ppc64le"}, "method": "wheel"}]}}, {}, {}, X86, packages=["p"])


def test_source_builds_disallowed():
    matrix = {
        "a": {"methods": [{"method": "source"}]},
        "b": {"methods": [{"method": "wheel", "fallback": "source"}], "source": {"prereqs": ["rustc"]}},
    }
    plan = mp.resolve(matrix, {}, {}, X86, packages=["a", "b"], allow_source_builds=False)
    assert plan[0]["method"] == "skip" and "allow_source_builds" in plan[0]["skip_reason"]
    assert plan[1]["fallback"] is None
    assert mp.possible_prereqs(plan) == []
    assert mp.possible_prereqs(mp.resolve(matrix, {}, {}, X86, packages=["b"])) == ["rustc"]


def test_constraints_pin_versions_and_existing_local_wheels(tmp_path):
    wheel = tmp_path / "torch-2.11.0+sparkforge-cp311-cp311-linux_aarch64.whl"
    wheel.write_bytes(b"x")
    installed = {
        "torch": {"name": "torch", "version": "2.11.0+sparkforge", "url": "file://" + str(wheel).replace("+", "%2B")},
        "triton": {"name": "triton", "version": "3.6.0", "url": "file:///gone/triton-3.6.0.whl"},
        "einops": {"name": "einops", "version": "0.8.2", "url": None},
    }
    text = mp.constraints_text(installed, ["torch", "torchvision", "torchaudio", "triton"])
    lines = text.splitlines()[1:]
    assert lines == ["torch @ file://" + str(wheel).replace("+", "%2B"), "triton==3.6.0"]


def test_report_and_guard():
    report = {"install": [
        {"download_info": {"url": "http://127.0.0.1/x/usestorch-1.0-py3-none-any.whl"},
         "metadata": {"name": "usestorch", "version": "1.0"}},
        {"download_info": {"url": "http://127.0.0.1/x/torch-9.9-py3-none-any.whl"},
         "metadata": {"name": "Torch", "version": "9.9"}},
        {"download_info": {"url": "http://127.0.0.1/x/torchvision-0.1.tar.gz"},
         "metadata": {"name": "torchvision", "version": "0.1"}}]}
    items = mp.report_install_items(json.loads(json.dumps(report)))
    assert [i["from_source"] for i in items] == [False, False, True]
    installed = {"torch": {"version": "2.11.0+sparkforge"}}
    problems = mp.guard_violations(items, ["torch", "torchvision"], installed)
    assert problems[0].startswith("would replace torch 2.11.0+sparkforge (installed) with torch 9.9")
    assert problems[1].startswith("would install torchvision 0.1")


def test_classify_failure_texts():
    guard = ("ERROR: Cannot install badtorch==1.0 because these package versions have conflicting dependencies.\n"
             "The conflict is caused by:\n    badtorch 1.0 depends on torch==9.9\n"
             "    The user requested (constraint) torch==2.11.0+sparkforge\n"
             "ERROR: ResolutionImpossible: for help visit ...\n")
    kind, lines = mp.classify_failure(guard, ["torch"])
    assert kind == "guard" and "badtorch 1.0 depends on torch==9.9" in lines
    other = guard.replace("(constraint) torch==2.11.0+sparkforge", "numpy==1.0")
    assert mp.classify_failure(other, ["torch"])[0] == "conflict"
    nowheel = ("ERROR: Could not find a version that satisfies the requirement x==1 (from versions: none)\n"
               "ERROR: No matching distribution found for x==1\n")
    assert mp.classify_failure(nowheel, ["torch"])[0] == "no_wheel"
    assert mp.classify_failure("error: command 'gcc' failed", ["torch"]) == ("other", ["error: command 'gcc' failed"])


def test_pip_version_gate():
    assert mp.pip_version_ok("pip 23.2.1 from /v/lib/python3.11/site-packages/pip (python 3.11)")
    assert mp.pip_version_ok("pip 25.0 from x")
    assert not mp.pip_version_ok("pip 22.3.1 from x")
    assert not mp.pip_version_ok("")


def test_dist_digest_changes_with_one_byte(tmp_path):
    info = tmp_path / "torch-2.11.0.dist-info"
    info.mkdir()
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("A = 1\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"cache")
    (info / "RECORD").write_text("torch/__init__.py,sha256=x,6\ntorch/__pycache__/__init__.cpython-311.pyc,,\n"
                                 "torch-2.11.0.dist-info/RECORD,,\n")
    first = mp.dist_digest(str(info))
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"recompiled")
    assert mp.dist_digest(str(info)) == first
    (pkg / "__init__.py").write_text("A = 2\n")
    assert mp.dist_digest(str(info))["sha256"] != first["sha256"]
    assert first["files"] == 2
    assert mp.dist_digest(str(tmp_path / "nope")) is None


def test_install_args_per_method():
    item = {"name": "Tok_enizers", "requirement": "Tok_enizers==1", "index_url": "https://i/simple",
            "source": {"spec": None, "build_isolation": False, "env": {"A": "1"}, "prereqs": []}}
    assert mp.install_args(item, "wheel") == ["--only-binary", "tok-enizers", "Tok_enizers==1"]
    assert mp.install_args(item, "index")[2:4] == ["--extra-index-url", "https://i/simple"]
    assert mp.install_args(item, "source") == ["--no-binary", "tok-enizers", "--no-build-isolation", "Tok_enizers==1"]
    assert mp.build_env(item, "source", {"B": "2"}) == {"A": "1", "B": "2"}
    assert mp.build_env(item, "wheel", {"B": "2"}) == {"B": "2"}
    assert mp.index_args(no_index=True, find_links=["/w"]) == ["--no-index", "--find-links", "/w"]


def test_format_table():
    text = mp.format_table([{"name": "einops", "status": "installed", "version": "0.8.2", "method": "wheel",
                             "method_used": "wheel", "fallback_taken": False, "reason": ""},
                            {"name": "flash-attn", "status": "skipped", "method": "source", "experimental": True,
                             "reason": "opt-in"}])
    lines = text.splitlines()
    assert lines[0].split() == list(mp.TABLE_COLUMNS)
    assert lines[2].startswith("flash-attn") and "EXPERIMENTAL; opt-in" in lines[2]


def test_report_rows_are_stable_across_reruns():
    first = {"name": "tok", "status": "installed", "version": "1", "method": "wheel", "method_used": "source",
             "fallback_taken": True, "reason": "no wheel", "duration_s": 3.2, "caveats": []}
    provenance = mp.record_provenance({}, first)
    rerun = {"name": "tok", "status": "present", "version": "1", "method": "wheel", "caveats": []}
    mp.apply_provenance(rerun, provenance)
    assert mp.report_rows([rerun]) == mp.report_rows([first])
    assert mp.report_rows([first])[0]["state"] == "installed"
    other = mp.apply_provenance({"name": "tok", "version": "2"}, provenance)
    assert other["method_used"] == "already installed"
