# -*- coding: utf-8 -*-
"""The class's wheels on the builder and on every host: real wheels, real pip (offline, --find-links)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_report
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import fleet_wheels as fw


def make_wheel(directory, name, version, requires=()):
    """A minimal valid pure-Python wheel (pip installs and resolves it)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s-%s-py3-none-any.whl" % (name, version))
    info = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: "VERSION = %r\n" % version,
        "%s/METADATA" % info: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
            name, version, "".join("Requires-Dist: %s\n" % r for r in requires)),
        "%s/WHEEL" % info: "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for arc, text in files.items():
            archive.writestr(arc, text)
        archive.writestr("%s/RECORD" % info, "".join("%s,,\n" % arc for arc in files) + "%s/RECORD,,\n" % info)
    return path


def sha(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def run(argv, env):
    proc = subprocess.run(argv, env=dict(os.environ, **env), capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def built(tmp_path):
    triton = make_wheel(str(tmp_path / "triton-build"), "triton", "3.6.0")
    torch = make_wheel(str(tmp_path / "torch-build"), "torch", "2.11.0", requires=["depy"])
    index = tmp_path / "index"
    make_wheel(str(index), "depy", "1.0")
    domains = tmp_path / "domains"
    make_wheel(str(domains), "torchvision", "0.26.0")
    make_wheel(str(domains), "torchaudio", "2.11.0")
    return {"triton": {"wheel": triton, "cache_key": "t" * 64, "built": ["triton"]},
            "torch": {"wheel": torch, "cache_key": "p" * 64, "changed": False},
            "domains": {"dir": str(domains), "key": "d" * 16,
                        "libraries": {"torchvision": "0.26.0", "torchaudio": "2.11.0"}, "built": ["torchaudio"]},
            "env": {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}, "root": tmp_path}


def test_artifacts_in_install_order_with_what_was_built(built):
    arts = fw.build_artifacts(built["triton"], built["torch"], built["domains"])
    assert [a["name"] for a in arts] == ["triton", "torch", "torchvision", "torchaudio"]
    assert [a["built"] for a in arts] == [True, False, False, True]
    assert arts[0]["key"] == "t" * 64 and arts[2]["key"] == "d" * 16
    assert fw.build_artifacts(None, None, None) == []


def test_a_result_without_its_wheel_is_an_error(built, tmp_path):
    with pytest.raises(fw.FleetWheelError, match="torch build result names no wheel"):
        fw.build_artifacts(None, {"wheel": str(tmp_path / "gone.whl"), "cache_key": "k"})
    with pytest.raises(fw.FleetWheelError, match="triton build result has no cache_key"):
        fw.build_artifacts({"wheel": built["triton"]["wheel"]})


def test_domains_need_exactly_one_wheel_each(built):
    make_wheel(built["domains"]["dir"], "torchvision", "0.26.0.post1")
    with pytest.raises(fw.FleetWheelError, match=r"expected one torchvision wheel .* found \['torchvision-0.26.0-"):
        fw.build_artifacts(domains=built["domains"])
    gone = dict(built["domains"], libraries={"torchtext": "0.18.0"})
    with pytest.raises(fw.FleetWheelError, match="expected one torchtext wheel .* found none"):
        fw.build_artifacts(domains=gone)


def test_dependencies_resolved_once_per_artifact_set(built):
    arts = fw.build_artifacts(built["triton"], built["torch"])
    root = str(built["root"] / "deps")
    dest, deps, resolved = fw.resolve_dependencies(run, sys.executable, root, arts, built["env"])
    assert resolved and os.path.basename(dest) == fw.dependency_key([sha(a["path"]) for a in arts])
    # Only the dependency stays: pip wheel copies the artifacts too.
    assert sorted(os.listdir(dest)) == ["depy-1.0-py3-none-any.whl"]
    assert deps == [{"name": "depy", "path": os.path.join(dest, "depy-1.0-py3-none-any.whl"),
                     "key": os.path.basename(dest), "built": False, "kind": "dependency"}]
    # The same artifacts again: pip does not run (a runner that fails proves it).
    again = fw.resolve_dependencies(lambda argv, env: (1, "", "must not run"), sys.executable, root, arts)
    assert again == (dest, deps, False)
    # Check mode on a new set says a resolution would run and writes nothing.
    new = fw.build_artifacts(None, built["torch"])
    would = fw.resolve_dependencies(run, sys.executable, root, new, built["env"], check_mode=True)
    assert would[1:] == ([], True) and not os.path.exists(would[0])


def test_a_failed_resolution_leaves_no_dependency_set(built):
    arts = fw.build_artifacts(None, built["torch"])
    root = str(built["root"] / "deps")
    empty = str(built["root"] / "empty-index")
    os.makedirs(empty)
    with pytest.raises(fw.FleetWheelError, match=r"pip could not resolve the dependencies of torch-2.11.0.*\(exit 1\)"):
        fw.resolve_dependencies(run, sys.executable, root, arts, {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": empty})
    key = fw.dependency_key([sha(arts[0]["path"])])
    assert not os.path.exists(os.path.join(root, key))


def test_describe_publishes_dir_file_and_sha256(built):
    wheels = fw.describe(fw.build_artifacts(built["triton"]))
    assert wheels == [{"name": "triton", "kind": "artifact", "dir": "triton-" + "t" * 16,
                       "file": "triton-3.6.0-py3-none-any.whl", "path": built["triton"]["wheel"],
                       "sha256": sha(built["triton"]["wheel"]), "cache_key": "t" * 64, "manifest": None}]
    # With its build record beside it, the summary of the record travels with the wheel (into a generation).
    record = {"cache_key": "t" * 64, "triton_commit": "c" * 40, "reproducible": {"leaks": []}, "log": "/x.log",
              "inputs": {"big": "not kept"}}
    with open(built["triton"]["wheel"] + ".sparkforge.json", "w") as handle:
        json.dump(record, handle)
    try:
        assert fw.describe(fw.build_artifacts(built["triton"]))[0]["manifest"] == {
            "cache_key": "t" * 64, "triton_commit": "c" * 40, "reproducible": {"leaks": []}}
    finally:
        os.unlink(built["triton"]["wheel"] + ".sparkforge.json")


def test_copies_checked_and_only_changed_wheels_installed(built, tmp_path):
    wheels = fw.describe(fw.build_artifacts(built["triton"], built["torch"]))
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    assert fw.check_copies(str(host_dir), wheels) == [
        ("triton-3.6.0-py3-none-any.whl", "missing from %s" % host_dir),
        ("torch-2.11.0-py3-none-any.whl", "missing from %s" % host_dir)]
    for w in wheels:
        with open(w["path"], "rb") as src, open(str(host_dir / w["file"]), "wb") as dst:
            dst.write(src.read())
    with open(str(host_dir / wheels[1]["file"]), "ab") as handle:
        handle.write(b"x")
    bad = fw.check_copies(str(host_dir), wheels)
    assert [b[0] for b in bad] == ["torch-2.11.0-py3-none-any.whl"] and "the builder's wheel" in bad[0][1]

    record = str(tmp_path / "record.json")
    assert fw.read_record(record) == {}
    with open(record, "w") as handle:
        handle.write("{not json")
    assert fw.read_record(record) == {}
    fw.write_record(record, {"triton": wheels[0]["sha256"], "torch": "old"})
    assert [w["name"] for w in fw.to_install(wheels, fw.read_record(record))] == ["torch"]
    assert not os.path.exists(record + ".tmp")


def test_hash_cache_reads_a_file_again_only_when_its_size_or_mtime_changed(built, tmp_path):
    wheels = fw.describe(fw.build_artifacts(built["triton"], built["torch"]))
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    for w in wheels:
        with open(w["path"], "rb") as src, open(str(host_dir / w["file"]), "wb") as dst:
            dst.write(src.read())
    first = fw.HashCache(str(host_dir))
    assert fw.check_copies(str(host_dir), wheels, first) == []
    assert sorted(first.hashed) == sorted(w["file"] for w in wheels)
    first.save()
    cache_file = host_dir / fw.HASH_CACHE_NAME
    assert sorted(json.loads(cache_file.read_text())) == sorted(w["file"] for w in wheels)

    again = fw.HashCache(str(host_dir))
    assert fw.check_copies(str(host_dir), wheels, again) == [] and again.hashed == []
    again.save()  # nothing read, nothing to write

    # Same size, new bytes and a new mtime: read again, and the change is found.
    torch_copy = str(host_dir / wheels[1]["file"])
    data = bytearray(open(torch_copy, "rb").read())
    data[-1] ^= 0xFF
    with open(torch_copy, "wb") as handle:
        handle.write(bytes(data))
    st = os.stat(torch_copy)
    os.utime(torch_copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    changed = fw.HashCache(str(host_dir))
    bad = fw.check_copies(str(host_dir), wheels, changed)
    assert [b[0] for b in bad] == [wheels[1]["file"]] and changed.hashed == [wheels[1]["file"]]

    # rehash reads everything; check mode (write=False) leaves the cache file as it was.
    before = cache_file.read_text()
    full = fw.HashCache(str(host_dir), rehash=True, write=False)
    fw.check_copies(str(host_dir), wheels, full)
    assert sorted(full.hashed) == sorted(w["file"] for w in wheels)
    full.save()
    assert cache_file.read_text() == before


def test_a_corrupt_hash_cache_is_ignored(built, tmp_path):
    directory = os.path.dirname(built["triton"]["wheel"])
    with open(os.path.join(directory, fw.HASH_CACHE_NAME), "w") as handle:
        handle.write("[not a dict")
    hashes = fw.Hashes()
    wheels = fw.describe(fw.build_artifacts(built["triton"]), hashes)
    assert wheels[0]["sha256"] == sha(built["triton"]["wheel"]) and hashes.hashed() == [wheels[0]["file"]]
    hashes.save()
    assert fw.Hashes().sha256(built["triton"]["wheel"]) == wheels[0]["sha256"]


def test_install_argv_is_offline_and_exact(tmp_path):
    argv = fw.install_argv("/v/bin/python", "/w", [{"file": "a.whl"}], "--no-compile --quiet")
    # --isolated: the host's PIP_* variables and user configuration add no source (issue 33).
    assert argv == ["/v/bin/python", "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-index",
                    "--find-links", "/w", "--force-reinstall", "--no-deps", "--no-compile", "--quiet", "/w/a.whl"]


def test_the_install_argv_installs_for_real(built, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheels = fw.describe(fw.build_artifacts(built["triton"]))
    directory = os.path.dirname(built["triton"]["wheel"])
    argv = fw.install_argv(sys.executable, directory, wheels, "--target %s" % (tmp_path / "site"))
    assert run(argv, {})[0] == 0
    assert (tmp_path / "site" / "triton" / "__init__.py").is_file()


def test_summary_keeps_the_hosts_the_run_saw(tmp_path):
    raw = {
        "b1": {"seen": True, "state": "provisioned", "class": "c1", "builder": True, "builds": ["torch"],
               "wheels": {"torch": "ab"}, "generation": 2, "how": "upgrade from generation 1"},
        "m1": {"seen": True, "state": "failed", "error": "Install: boom", "class": "c1"},
        "r1": {"seen": True, "state": "rolled_back", "error": "generation 2 failed; rolled back to generation 1",
               "class": "c1", "generation": 1, "how": "rolled back from generation 2"},
        "p1": {"seen": True},
        "never": {"seen": False, "state": None},
    }
    summary = fleet_report.summarize(raw)
    assert list(summary) == ["b1", "m1", "r1", "p1"]
    assert summary["p1"] == {"state": "failed", "error": fleet_report.STOPPED, "class": None, "lineage": None,
                             "builder": False, "builds": [], "wheels": {}, "generation": None, "how": None}
    assert summary["b1"]["error"] is None and summary["m1"]["error"] == "Install: boom"
    lines = fleet_report.render(summary)
    assert lines[0].split() == ["b1", "provisioned", "c1", "generation", "2", "(upgrade", "from", "generation", "1)",
                                "(builder,", "built:", "torch)"]
    assert lines[1].split() == ["torch", "sha256", "ab"]
    assert lines[2].endswith("c1: Install: boom")
    assert lines[3] == ("r1                   rolled_back c1 generation 1 (rolled back from generation 2): "
                        "generation 2 failed; rolled back to generation 1")
    paths = fleet_report.write(str(tmp_path / "r"), summary)
    fleet_report.write(str(tmp_path / "r"), summary)
    with open(paths[0]) as handle:
        assert json.load(handle) == summary
    with open(paths[1]) as handle:
        runs = [json.loads(line) for line in handle]
    assert len(runs) == 2 and runs[0]["hosts"] == summary and runs[0]["check"] is False


def _site(tmp_path, torch_body):
    """A site directory holding triton 3.6.0 and torch 2.11.0 (dist-info and package), as a venv would."""
    site = tmp_path / "site"
    for name, version, body in (("triton", "3.6.0", ""), ("torch", "2.11.0", torch_body)):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(body)
        info = site / ("%s-%s.dist-info" % (name, version))
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    return str(site)


def _runner(site):
    def run(argv):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              env=dict(os.environ, PYTHONPATH=site), check=False)
        return proc.returncode, proc.stdout, proc.stderr
    return run


def test_venv_state_reads_versions_and_what_import_torch_gives_in_one_process(tmp_path):
    site = _site(tmp_path, "__version__ = '2.11.0+cu130'\n"
                           "class version:\n    cuda = '13.0'\n"
                           "class cuda:\n    @staticmethod\n    def get_arch_list():\n        return ['sm_90', 'sm_120']\n")
    state = fw.read_venv_state(_runner(site), sys.executable, ["triton", "torch", "torchvision"])
    # torch.version.cuda too: the pytorch role's check that the result is the planned build (issue 33). Not
    # its arch list: the plan reads that, once (issue 45).
    assert state == {"packages": {"triton": "3.6.0", "torch": "2.11.0", "torchvision": ""},
                     "torch": {"version": "2.11.0+cu130", "cuda": "13.0"},
                     "torch_error": None}


def test_venv_state_says_why_torch_does_not_import(tmp_path):
    site = _site(tmp_path, "raise ImportError('libcudnn.so.9: cannot open shared object file')\n")
    state = fw.read_venv_state(_runner(site), sys.executable, ["torch"])
    assert state["packages"] == {"torch": "2.11.0"} and state["torch"] is None
    assert state["torch_error"] == "ImportError: libcudnn.so.9: cannot open shared object file"


def test_venv_state_of_a_missing_or_broken_venv_holds_nothing(tmp_path):
    missing = fw.read_venv_state(_runner(""), str(tmp_path / "venv" / "bin" / "python"), ["torch"])
    assert missing["packages"] == {"torch": ""} and missing["torch"] is None and "does not exist" in missing["torch_error"]
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'bad interpreter' >&2\nexit 3\n")
    broken.chmod(0o755)
    state = fw.read_venv_state(_runner(""), str(broken), ["torch"])
    assert state["packages"] == {"torch": ""} and "exit 3" in state["torch_error"] and "bad interpreter" in state["torch_error"]


def test_gpu_packages_come_after_the_domains_with_their_build_record(built, tmp_path):
    """heavy_wheel_build's results: listed last, built or not, their manifest (audit, inputs) carried."""
    heavy_dir = tmp_path / "heavy" / "sparkforge-cudaext-0123456789abcdef"
    wheel = make_wheel(str(heavy_dir), "sparkforge_cudaext", "1.0")
    record = {"cache_key": "h" * 64, "sha256": sha(wheel), "version": "1.0", "arch_list": "12.1",
              "depends_on": "p" * 64, "cuda": "release 13.0", "sdist": {"file": "x.tar.gz", "sha256": "s" * 64},
              "fixes": [], "audit": {"ok": True}, "key_inputs": {"not": "kept"}, "log": "/var/log/x"}
    with open(wheel + ".manifest.json", "w") as handle:
        json.dump(record, handle)
    heavy = [{"name": "sparkforge-cudaext", "wheel": wheel, "cache_key": "h" * 64, "changed": True,
              "module": "sparkforge_cudaext"}]
    arts = fw.build_artifacts(built["triton"], built["torch"], built["domains"], heavy)
    assert [a["name"] for a in arts] == ["triton", "torch", "torchvision", "torchaudio", "sparkforge-cudaext"]
    assert arts[-1]["built"] is True and arts[-1]["key"] == "h" * 64
    entry = fw.describe(arts)[-1]
    assert entry["dir"] == "sparkforge_cudaext-hhhhhhhhhhhhhhhh" and entry["module"] == "sparkforge_cudaext"
    assert entry["sha256"] == sha(wheel)
    assert entry["manifest"] == dict((k, v) for k, v in record.items() if k not in ("key_inputs", "log", "sha256"))


def test_a_gpu_package_result_without_its_wheel_is_an_error(built, tmp_path):
    with pytest.raises(fw.FleetWheelError, match="the sparkforge-cudaext build result names no wheel that exists"):
        fw.build_artifacts(heavy=[{"name": "sparkforge-cudaext", "wheel": str(tmp_path / "gone.whl"),
                                   "cache_key": "h" * 64}])
    wheel = make_wheel(str(tmp_path / "h"), "x", "1.0")
    with pytest.raises(fw.FleetWheelError, match="needs name and cache_key"):
        fw.build_artifacts(heavy=[{"name": "x", "wheel": wheel}])


def test_a_gpu_package_is_recorded_in_a_generation_with_its_import_name(built, tmp_path):
    """Its wheelhouse directory is a plain <name>-<key> name and the record keeps the import name, which
    the rollback's gate (venv_import_check of the record's wheels) imports."""
    from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
    wheel = make_wheel(str(tmp_path / "heavy"), "sparkforge_cudaext", "1.0")
    entry = fw.describe(fw.build_artifacts(heavy=[{"name": "sparkforge-cudaext", "wheel": wheel,
                                                   "cache_key": "0123456789abcdef" * 4, "module": "sparkforge_cudaext"}]))
    wheelhouse = tmp_path / "wheelhouse"
    (wheelhouse / "c1" / entry[0]["dir"]).mkdir(parents=True)
    with open(wheel, "rb") as src, open(str(wheelhouse / "c1" / entry[0]["dir"] / entry[0]["file"]), "wb") as dst:
        dst.write(src.read())
    gen.publish(str(wheelhouse), "spark", "c1", entry, "a1", {"torch": "2.12.0"}, keep=2, now="t1")
    recorded = gen.load(str(wheelhouse), "spark")["generations"][0]["wheels"][0]
    assert recorded["dir"] == "sparkforge_cudaext-0123456789abcdef" and recorded["module"] == "sparkforge_cudaext"
