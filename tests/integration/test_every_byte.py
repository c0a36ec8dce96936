"""Every byte proven (docs/bad-inputs.md, rows T01.. and W01..), without containers.

Each row is refused with its message and nothing changed: the rule itself (module_utils, the
exact message), preflight's module (stack_plan, offline_bundle_info) where the row is a source or a
wheelhouse, and three check-mode runs of playbooks/spark.yml on this machine (a tampered bundle, bad
sha256 variables, and an unproven keyring + a truncated wheel + a malformed proxy at once): exit code 2,
the messages, the host's snapshot and the checkout's `git status` unchanged.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile

import pytest

from helpers import COLLECTIONS, REPO, load_manifest, run_module
from test_check_mode_local import BIN, make_host, snapshot, template_venv, watched  # noqa: F401 (a fixture)
from test_sources_preflight import CHECKS, H100, MANIFEST_KEYS, env_without_proxies

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import bundle  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import sources, validate  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check  # noqa: E402
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight as pf  # noqa: E402

PY = "%d.%d" % sys.version_info[:2]
CP = "cp%d%d" % sys.version_info[:2]
OTHER_CP = "cp%d%d" % (sys.version_info[0], sys.version_info[1] + 1)


def git_status():
    return subprocess.run(["git", "-C", REPO, "status", "--porcelain"], stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout


def sha(data):
    return hashlib.sha256(data).hexdigest()


def make_wheel(directory, filename, files=None):
    """A wheel pip could install: a package, its .dist-info METADATA, WHEEL and RECORD."""
    name, version = filename.split("-")[:2]
    info = "%s-%s.dist-info" % (name, version)
    path = os.path.join(str(directory), filename)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("%s/__init__.py" % name, "")
        for member, text in (files if files is not None else {
                "%s/METADATA" % info: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
                "%s/WHEEL" % info: "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n",
                "%s/RECORD" % info: ""}).items():
            archive.writestr(member, text)
    return path


def truncate(path):
    with open(path, "rb") as handle:
        data = handle.read()
    with open(path, "wb") as handle:
        handle.write(data[:len(data) // 2])


# ------------------------------------------------------------------ a bundle and its manifest

def make_bundle(root):
    """A small bundle as the maker lays it out: a wheel directory with its simple/ page, an apt file."""
    out = root / "bundle"
    wheels = out / "wheels" / ("%s-x86_64" % CP)
    wheels.mkdir(parents=True)
    make_wheel(wheels, "torch-2.11.0-%s-%s-linux_x86_64.whl" % (CP, CP))
    make_wheel(wheels, "einops-0.8.1-py3-none-any.whl")
    (wheels / "simple" / "torch").mkdir(parents=True)
    (wheels / "simple" / "torch" / "index.html").write_text("<a href=\"../../torch.whl\">torch</a>\n")
    (out / "apt" / "ubuntu2404" / "x86_64").mkdir(parents=True)
    (out / "apt" / "ubuntu2404" / "x86_64" / "Packages").write_text("Package: cuda-keyring\n")
    items = []
    for base, dummy, files in os.walk(str(out)):
        for fname in files:
            full = os.path.join(base, fname)
            with open(full, "rb") as handle:
                data = handle.read()
            items.append({"path": os.path.relpath(full, str(out)), "sha256": sha(data), "size": len(data),
                          "origin": "test", "kind": "wheel", "target": "any"})
    manifest = {"format": bundle.FORMAT, "made": "2026-11-26T00:00:00Z", "targets": [], "plans": [], "sources": [],
                "items": sorted(items, key=lambda i: i["path"])}
    (out / bundle.MANIFEST).write_text(json.dumps(manifest))
    return out, manifest


TORCH_REL = "wheels/%s-x86_64/torch-2.11.0-%s-%s-linux_x86_64.whl" % (CP, CP, CP)
EINOPS_REL = "wheels/%s-x86_64/einops-0.8.1-py3-none-any.whl" % CP
EXTRA_REL = "wheels/%s-x86_64/evil-1.0-py3-none-any.whl" % CP


def flip(out, rel):
    path = out / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))


def set_manifest(out, edit):
    manifest = json.loads((out / bundle.MANIFEST).read_text())
    edit(manifest)
    (out / bundle.MANIFEST).write_text(json.dumps(manifest))


BUNDLE_ROWS = [
    pytest.param(lambda out: flip(out, TORCH_REL), TORCH_REL, "sha256 [0-9a-f]{64}, the manifest says [0-9a-f]{64}",
                 id="T01"),
    pytest.param(lambda out: (out / EINOPS_REL).unlink(), EINOPS_REL, "missing from the bundle directory", id="T02"),
    pytest.param(lambda out: make_wheel(out / os.path.dirname(EXTRA_REL), os.path.basename(EXTRA_REL)), EXTRA_REL,
                 r"not in the manifest \(an extra file\)", id="T03"),
    pytest.param(lambda out: set_manifest(out, lambda m: [i.update(sha256=i["sha256"][:40]) for i in m["items"]
                                                          if i["path"] == EINOPS_REL]),
                 EINOPS_REL, "the manifest's sha256 '[0-9a-f]{40}' is not 64 hexadecimal digits", id="T05"),
]


@pytest.mark.parametrize("edit,rel,message", BUNDLE_ROWS)
def test_a_bundle_file_that_differs_from_the_manifest_is_named(tmp_path, edit, rel, message):
    import re
    out, manifest = make_bundle(tmp_path)
    assert bundle.verify(str(out), manifest) == []
    edit(out)
    git_before, before = git_status(), snapshot(out)
    result, rc = run_module("offline_bundle_info", {"path": str(out)})
    assert rc == 0 and not result["changed"], result
    problems = ["%s: %s" % (b["path"], b["problem"]) for b in result["bad"]]
    assert len(problems) == 1 and re.match(re.escape(rel) + ": " + message + "$", problems[0]), problems
    assert snapshot(out) == before and git_status() == git_before


@pytest.mark.parametrize("row", ["T04"])
def test_t04_a_bundle_without_its_manifest_is_refused(tmp_path, row):
    out, dummy = make_bundle(tmp_path)
    (out / bundle.MANIFEST).unlink()
    before = snapshot(out)
    result, rc = run_module("offline_bundle_info", {"path": str(out)})
    assert rc != 0 and result["failed"], result
    assert "cannot read the bundle's manifest" in result["msg"]  # T04
    assert snapshot(out) == before


@pytest.mark.parametrize("row", ["T06"])
def test_t06_a_hosts_wheel_row_is_bad_when_a_wheel_beside_the_simple_pages_differs(tmp_path, row):
    out, manifest = make_bundle(tmp_path)
    flip(out, TORCH_REL)
    target = {"id": "ubuntu2404-amd64-py%s" % PY, "distro": "ubuntu2404", "repo_arch": "x86_64", "deb_arch": "amd64",
              "python": PY, "machine": "x86_64"}
    manifest["targets"] = [target]
    manifest["sources"] = [{"kind": "index", "url": "https://download.pytorch.org/whl/cu130", "targets": {
        target["id"]: {"path": "wheels/%s-x86_64/simple" % CP, "requirements": ["torch==2.11.0"]}}}]
    item = {"component": "pytorch", "source": "torch package index", "url": "https://download.pytorch.org/whl/cu130",
            "kind": "index", "variable": "sparkforge_torch_index_url", "sha256": None, "key": "torch_index_url"}
    plan = {"torch": {"version": "2.11.0", "source": "index"}, "actions": {"pytorch": "install"}}
    rows, problems = bundle.match(manifest, [item], target, plan, bundle.verify(str(out), manifest))
    assert rows[0]["status"] == "bad"
    assert problems and problems[0].startswith("pytorch: torch package index: bundle file %s: sha256 " % TORCH_REL), \
        problems  # T06
    # The host copies nothing of a bad row.
    assert bundle.host_copy(rows, target) == ([], [])


# ------------------------------------------------------------------ roots of trust

KEYRING = "cuda-keyring_1.1-1_all.deb"


def keyring_item(url, sha256=""):
    return {"component": "cuda_libs", "source": "cuda-keyring", "url": url, "probe": url, "kind": "http",
            "variable": "sparkforge_cuda_repo_url", "sha256": sha256 or None, "key": "cuda_repo_url"}


def installer_item(url, sha256=""):
    return {"component": "cusparselt", "source": "cuSPARSELt installer", "url": url, "probe": url, "kind": "http",
            "variable": "sparkforge_cusparselt_base_url", "sha256": sha256 or None, "key": "cusparselt_base_url"}


@pytest.mark.parametrize("row", ["T07"])
def test_t07_a_mirror_file_on_disk_that_differs_from_its_pin_is_refused_without_probing(tmp_path, row):
    deb = tmp_path / KEYRING
    deb.write_bytes(b"a changed keyring")
    item = keyring_item("file://%s" % deb, sha(b"the keyring"))
    (row,) = sources.unprobed([item])
    assert row["status"] == "refused"
    assert row["error"] == "%s has sha256 %s, the pin (sparkforge_cuda_keyring_sha256) is %s" % (
        deb, sha(b"a changed keyring"), sha(b"the keyring"))  # T07
    # The same file, as pinned, passes.
    assert sources.problems_of(keyring_item("file://%s" % deb, sha(b"a changed keyring"))) is None


@pytest.mark.parametrize("item,message", [
    pytest.param(keyring_item("http://mirror.example/cuda/ubuntu2404/sbsa/" + KEYRING),
                 "http://mirror.example/cuda/ubuntu2404/sbsa/%s is plain http and no sha256 to check the download "
                 "against: use https, or set the file's sha256 (sparkforge_cuda_keyring_sha256)" % KEYRING, id="T08"),
    pytest.param(keyring_item("http://mirror.example/cuda/ubuntu2404/sbsa/" + KEYRING, "abc"),
                 "its pinned sha256 'abc' (sparkforge_cuda_keyring_sha256) is not 64 hexadecimal digits", id="T09"),
    pytest.param(installer_item("http://mirror.example/cusparselt/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb"),
                 "is plain http and no sha256 to check the download against: use https, or set the file's sha256 "
                 "(sparkforge_cusparselt_sha256)", id="T12"),
    pytest.param(keyring_item("file:///srv/mirror/cuda/ubuntu2404/sbsa/" + KEYRING),
                 "/srv/mirror/cuda/ubuntu2404/sbsa/%s is a local file with no sha256 pinned" % KEYRING, id="T13"),
])
def test_a_root_of_trust_without_tls_or_a_valid_pin_is_refused_probing_or_not(item, message):
    assert message in sources.problems_of(item)
    (row,) = sources.unprobed([item])
    assert row["status"] == "refused" and message in row["error"]
    (row,) = sources.probe([item], 1, lambda url, timeout: pytest.fail("a refused source is never fetched"))
    assert row["status"] == "refused" and message in row["error"]


def test_https_or_a_valid_pin_passes_and_a_signed_repository_may_be_plain_http():
    assert sources.problems_of(keyring_item("https://developer.download.nvidia.com/x/" + KEYRING)) is None
    assert sources.problems_of(keyring_item("http://mirror.example/x/" + KEYRING, "ab" * 32)) is None
    repo = dict(keyring_item("http://mirror.example/cuda/ubuntu2404/sbsa/"), source="CUDA apt repository")
    assert sources.problems_of(repo) is None


SHA_ROWS = [
    pytest.param({"sparkforge_cuda_keyring_sha256": "abc"},
                 "sparkforge_cuda_keyring_sha256: 'abc' is not a sha256 (64 hexadecimal digits)", id="T09"),
    pytest.param({"sparkforge_cuda_keyring_sha256": "a" * 63},
                 "sparkforge_cuda_keyring_sha256: '%s' is not a sha256 (64 hexadecimal digits)" % ("a" * 63), id="T10"),
    pytest.param({"sparkforge_cusparselt_sha256": {"0.8.1": {"ubuntu2404": {"arm64": "not-hex"}}}},
                 "sparkforge_cusparselt_sha256: ['0.8.1']['ubuntu2404']['arm64'] is 'not-hex', not a sha256 "
                 "(64 hexadecimal digits)", id="T11"),
    pytest.param({"cuda_libs_keyring_sha256": "g" * 64},
                 "cuda_libs_keyring_sha256: '%s' is not a sha256 (64 hexadecimal digits)" % ("g" * 64), id="T14"),
    pytest.param({"sparkforge_cuda_keyring_sha256_map": {"1.1-1": {"ubuntu2404": {"sbsa": 12}}}},
                 "sparkforge_cuda_keyring_sha256_map: ['1.1-1']['ubuntu2404']['sbsa'] is 12 (int), not a sha256 "
                 "(64 hexadecimal digits)",
                 id="T15"),
]


@pytest.mark.parametrize("values,message", SHA_ROWS)
def test_every_sha256_variable_is_64_hex(values, message):
    specs = {"cuda_libs_keyring_sha256": {"type": "str"}}
    dummy, errors = validate.check(values, specs)
    assert [e["message"] for e in errors] == [message]


def test_the_manifests_own_pins_are_valid_and_named_per_repository():
    m = load_manifest()
    dummy, errors = validate.check(dict((k, m[k]) for k in ("sparkforge_cuda_keyring_sha256",
                                                             "sparkforge_cuda_keyring_sha256_map",
                                                             "sparkforge_cusparselt_sha256")), {})
    assert errors == []
    pins = m["sparkforge_cuda_keyring_sha256_map"][m["sparkforge_cuda_keyring_version"]]
    assert set(pins["ubuntu2404"]) == {"x86_64", "sbsa"}
    # A host's planned keyring gets its repository's pin, so plain http to a mirror of it is proven.
    filled = sources.fill_platform_names(
        {"cuda_keyring_version": "1.1-1", "cuda_keyring_sha256": ""},
        {"architecture": "aarch64", "distribution": "Ubuntu", "distribution_version": "24.04"},
        {"cuda_repo_arch_map": m["sparkforge_cuda_repo_arch_map"], "cuda_deb_arch_map": m["sparkforge_cuda_deb_arch_map"],
         "cuda_distro_map": m["sparkforge_cuda_distro_map"], "cuda_keyring_sha256": m["sparkforge_cuda_keyring_sha256_map"]})
    assert filled["cuda_keyring_sha256"] == pins["ubuntu2404"]["sbsa"]


@pytest.mark.parametrize("name,value,message", [
    pytest.param("https_proxy", "proxy:3128", "the host's environment variable https_proxy='proxy:3128' is not a proxy URL",
                 id="T16"),
    pytest.param("HTTP_PROXY", "http//x", "the host's environment variable HTTP_PROXY='http//x' is not a proxy URL",
                 id="T17"),
    pytest.param("https_proxy", "http://proxy:99999", "https_proxy='http://proxy:99999' has no valid host and port",
                 id="T18"),
])
def test_a_malformed_proxy_is_named_with_its_value(name, value, message):
    (problem,) = sources.proxy_problems({name: value, "no_proxy": "localhost"})
    assert message in problem and problem.startswith("the host's environment variable %s=" % name), problem
    assert sources.proxy_problems({name: "http://proxy.example:3128", "all_proxy": "socks5h://p:1080"}) == []


# ------------------------------------------------------------------ stack_plan: sources and proxies

def plan_args(components, source="index", wheelhouse="/nonexistent", **more):
    m = load_manifest()
    base = "http://mirror.example"
    urls = {"cuda_repo_url": base + "/cuda", "cuda_distro": "ubuntu2404", "cuda_repo_arch": "x86_64",
            "cuda_keyring_version": "1.1-1", "cuda_keyring_sha256": "", "cusparselt_version": "0.8.1",
            "cusparselt_base_url": base + "/cusparselt/{version}/", "cusparselt_sha256": "", "deb_arch": "amd64",
            "torch_index_url": "https://download.pytorch.org/whl/cu130", "wheelhouse": wheelhouse,
            "ml_index_url": "", "ml_extra_index_urls": [], "build_index_url": "",
            "variables": {"cuda_repo_url": "sparkforge_cuda_repo_url", "wheelhouse": "sparkforge_wheel_dir"}}
    args = {"facts": H100, "host": {"name": "h1", "distribution": "Ubuntu", "distribution_version": "24.04",
                                    "python_version": sys.version.split()[0], "architecture": "x86_64"},
            "checks": CHECKS,
            "settings": {"components": components, "torch_version": "2.11.0", "torch_source": source,
                         "cuda_arch_list": "", "ml_profile": "minimal", "index_url": urls["torch_index_url"],
                         "dev_libraries": "always"},
            "manifest": dict((k, m[k]) for k in MANIFEST_KEYS), "sources": urls, "probe_sources": False}
    args.update(more)
    return args


def test_t08_t12_probing_off_still_refuses_the_unproven_roots_of_trust():
    result, rc = run_module("stack_plan", plan_args(["cuda_libs", "cusparselt", "pytorch"]), env=env_without_proxies())
    assert rc == 0 and not result["ready"], result
    messages = [p["message"] for p in result["problems"]]
    assert any(m.startswith("cuda_libs: cuda-keyring is refused: http://mirror.example/cuda/ubuntu2404/x86_64/"
                            "cuda-keyring_1.1-1_all.deb is plain http and no sha256") for m in messages), messages  # T08
    assert any(m.startswith("cusparselt: cuSPARSELt installer is refused: http://mirror.example/cusparselt/") and
               "(sparkforge_cusparselt_sha256)" in m for m in messages), messages  # T12
    # With the manifest's pin for the host's repository, the same plain-http mirror is proven.
    m = load_manifest()
    args = plan_args(["cuda_libs", "pytorch"], platform_maps={"cuda_keyring_sha256": m["sparkforge_cuda_keyring_sha256_map"]})
    result, rc = run_module("stack_plan", args, env=env_without_proxies())
    assert rc == 0 and result["ready"], result["problems"]


def test_t16_a_malformed_proxy_is_named_not_the_mirror():
    result, rc = run_module("stack_plan", dict(plan_args(["pytorch"]), probe_sources=True),
                            env=env_without_proxies(https_proxy="proxy:3128"))
    assert rc == 0 and not result["ready"]
    messages = [p["message"] for p in result["problems"]]
    assert messages == ["the host's environment variable https_proxy='proxy:3128' is not a proxy URL like "
                        "http://proxy.example:3128 (scheme http/https, then host and port)"], messages
    assert "mirror" not in " ".join(messages)


# ------------------------------------------------------------------ wheels in a wheelhouse

HOST_TORCH = "torch-2.11.0-%s-%s-linux_x86_64.whl" % (CP, CP)


def wh_torch_truncated(d):
    truncate(make_wheel(d, HOST_TORCH))


def wh_torch_other_arch(d):
    make_wheel(d, "torch-2.11.0-%s-%s-linux_aarch64.whl" % (CP, CP))


def wh_torch_other_python(d):
    make_wheel(d, "torch-2.11.0-%s-%s-manylinux_2_28_x86_64.whl" % (OTHER_CP, OTHER_CP))


def wh_not_a_zip(d):
    with open(os.path.join(str(d), HOST_TORCH), "w") as handle:
        handle.write("<html>404 Not Found</html>\n")


def wh_no_dist_info(d):
    make_wheel(d, HOST_TORCH, files={"torch/version.py": "x = 1\n"})


def wh_truncated_dependency(d):
    make_wheel(d, HOST_TORCH)
    truncate(make_wheel(d, "filelock-3.20.0-py3-none-any.whl"))


def wh_domain_other_arch(d):
    make_wheel(d, HOST_TORCH)
    make_wheel(d, "torchvision-0.26.0-%s-%s-linux_aarch64.whl" % (CP, CP))


def wh_both_wrong(d):
    make_wheel(d, "torch-2.11.0-%s-%s-win_amd64.whl" % (OTHER_CP, OTHER_CP))


def wh_no_torch(d):
    make_wheel(d, "einops-0.8.1-py3-none-any.whl")


def wh_triton_other_python(d):
    make_wheel(d, HOST_TORCH)
    make_wheel(d, "triton-3.6.0-%s-%s-manylinux_2_27_x86_64.whl" % (OTHER_CP, OTHER_CP))


def wh_manifest_differs(d):
    path = make_wheel(d, HOST_TORCH)
    with open(path + ".manifest.json", "w") as handle:
        json.dump({"sha256": sha(b"the wheel the build published"), "wheel_file": HOST_TORCH}, handle)


def wh_manifest_not_json(d):
    path = make_wheel(d, HOST_TORCH)
    with open(path + ".manifest.json", "w") as handle:
        handle.write("{truncated")


def torch_metadata(name="torch", version="2.11.0", info="torch-2.11.0.dist-info"):
    """The files of a torch wheel whose .dist-info and METADATA say ``name`` ``version``."""
    return {"%s/METADATA" % info: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n\nDescription\n" % (name, version),
            "%s/WHEEL" % info: "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: %s-%s-linux_x86_64\n" % (CP, CP),
            "%s/RECORD" % info: ""}


def wh_metadata_other_version(d):
    """The issue's torch: its file name says 2.11.0, its METADATA 2.10.0 (pip: 'inconsistent version')."""
    make_wheel(d, HOST_TORCH, files=torch_metadata(version="2.10.0", info="torch-2.10.0.dist-info"))


def wh_metadata_other_local_tag(d):
    make_wheel(d, "torch-2.11.0+cu130-%s-%s-linux_x86_64.whl" % (CP, CP), files=torch_metadata(version="2.11.0+cu129"))


def wh_metadata_other_project(d):
    make_wheel(d, HOST_TORCH, files=torch_metadata(name="torchvision", info="torchvision-2.11.0.dist-info"))


def wh_newer_glibc(d):
    make_wheel(d, "torch-2.11.0-%s-%s-manylinux_2_99_x86_64.whl" % (CP, CP))


WHEEL_ROWS = [
    pytest.param(wh_torch_truncated, "%s is not a valid zip (truncated or not a wheel" % HOST_TORCH, id="W01"),
    pytest.param(wh_torch_other_arch, "has no torch 2.11.0 wheel for this host (Python %s, x86_64): "
                 "torch-2.11.0-%s-%s-linux_aarch64.whl is for linux_aarch64, this host is x86_64" % (PY, CP, CP), id="W02"),
    pytest.param(wh_torch_other_python, "has no torch 2.11.0 wheel for this host (Python %s, x86_64): "
                 "torch-2.11.0-%s-%s-manylinux_2_28_x86_64.whl is for Python %s (ABI %s), the venv's Python is %s"
                 % (PY, OTHER_CP, OTHER_CP, OTHER_CP, OTHER_CP, PY), id="W03"),
    pytest.param(wh_not_a_zip, "%s is not a valid zip (truncated or not a wheel: File is not a zip file)" % HOST_TORCH,
                 id="W04"),
    pytest.param(wh_no_dist_info, "%s has no .dist-info/METADATA: not a wheel pip installs" % HOST_TORCH, id="W05"),
    pytest.param(wh_truncated_dependency, "filelock-3.20.0-py3-none-any.whl is not a valid zip", id="W06"),
    pytest.param(wh_domain_other_arch, "has no torchvision 0.26.0 wheel for this host", id="W07"),
    pytest.param(wh_triton_other_python, "has no triton 3.6.0 wheel for this host", id="W09"),
    pytest.param(wh_manifest_differs, "%s has sha256 " % HOST_TORCH, id="W10"),
    pytest.param(wh_manifest_not_json, "%s has a build manifest %s.manifest.json that cannot be read as JSON"
                 % (HOST_TORCH, HOST_TORCH), id="W11"),
    pytest.param(wh_no_torch, "has no torch 2.11.0 wheel (it holds 1 wheel(s), none of torch): pip installs torch "
                 "from it alone (--no-index)", id="W13"),
    pytest.param(wh_both_wrong, "win_amd64.whl is for win_amd64, this host is x86_64 and is for Python %s" % OTHER_CP,
                 id="W08"),
    pytest.param(wh_metadata_other_version, "%s says torch 2.11.0 in its file name, but its METADATA "
                 "(torch-2.10.0.dist-info/METADATA) says torch 2.10.0 (the version differs)" % HOST_TORCH, id="W14"),
    pytest.param(wh_metadata_other_local_tag, "says torch 2.11.0+cu130 in its file name, but its METADATA "
                 "(torch-2.11.0.dist-info/METADATA) says torch 2.11.0+cu129 (the local tag differs)", id="W15"),
    pytest.param(wh_metadata_other_project, "%s says torch 2.11.0 in its file name, but its metadata directory is "
                 "torchvision-2.11.0.dist-info" % HOST_TORCH, id="W16"),
    pytest.param(wh_newer_glibc, "has no torch 2.11.0 wheel for this host (Python %s, x86_64): torch-2.11.0-%s-%s-"
                 "manylinux_2_99_x86_64.whl is for manylinux_2_99_x86_64 (glibc 2.99 or newer), this host's glibc is %s"
                 % (PY, CP, CP, wheel_check.host_glibc()), id="W17"),
]


@pytest.mark.parametrize("fill,message", WHEEL_ROWS)
def test_a_wheel_pip_could_not_install_here_is_found_before_anything_changes(tmp_path, fill, message):
    house = tmp_path / "wheelhouse"
    house.mkdir()
    fill(house)
    git_before, before = git_status(), snapshot(house)
    problems = wheel_check.wheelhouse_problems(str(house), {"torch": "2.11.0", "torchvision": "0.26.0",
                                                            "triton": "3.6.0"}, PY, "x86_64", "sparkforge_wheel_dir",
                                                wheel_check.host_glibc())
    assert len(problems) == 1 and message in problems[0], problems
    assert problems[0].startswith("the wheelhouse %s (sparkforge_wheel_dir)" % house)
    # Preflight's module finds it as well, in check mode, and changes nothing.
    result, rc = run_module("stack_plan", plan_args(["triton", "pytorch", "torch_domains"], source="wheelhouse",
                                                    wheelhouse="file://%s" % house), check_mode=True,
                            env=env_without_proxies())
    assert rc == 0 and not result["ready"], result
    assert [p["message"] for p in result["problems"] if p["check"] == "wheelhouse"] == problems
    assert snapshot(house) == before and git_status() == git_before


def test_a_wheelhouse_whose_wheels_fit_passes(tmp_path):
    house = tmp_path / "wheelhouse"
    house.mkdir()
    make_wheel(house, HOST_TORCH)
    make_wheel(house, "torch-2.11.0-%s-%s-linux_aarch64.whl" % (CP, CP))  # another arch beside it: pip skips it
    make_wheel(house, "torchvision-0.26.0-%s-abi3-manylinux2014_x86_64.whl" % ("cp3%d" % (sys.version_info[1] - 1)))
    make_wheel(house, "einops-0.8.1-py3-none-any.whl")
    assert wheel_check.wheelhouse_problems(str(house), {"torch": "2.11.0", "torchvision": "0.26.0"}, PY, "x86_64",
                                           "v") == []
    assert wheel_check.tag_problem("torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_aarch64.whl", "3.12.3", "aarch64") is None


# ------------------------------------------------------------------ the playbook, in check mode

def spark(host, *extra, env=None):
    run_env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_") and "proxy" not in k.lower())
    run_env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                   PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", ANSIBLE_LOCAL_TEMP=str(host["root"] / "ansible-tmp"))
    run_env.update(env or {})
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "playbooks/spark.yml", "-i", host["inventory"],
                           "--check"] + list(extra), cwd=REPO, env=run_env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)


def flat(text):
    return " ".join(text.split())


def test_playbook_t01_t02_t03_a_tampered_bundle_stops_every_host_unchanged(tmp_path, template_venv):
    host = make_host(tmp_path, template_venv, "index", torch=False, components=["pytorch"])
    out, dummy = make_bundle(tmp_path)
    flip(out, TORCH_REL)
    (out / EINOPS_REL).unlink()
    make_wheel(out / os.path.dirname(EXTRA_REL), os.path.basename(EXTRA_REL))
    git_before, before = git_status(), snapshot(*watched(host) + [out])
    proc = spark(host, "-e", "sparkforge_bundle=%s" % out)
    text = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "does not match its manifest.json, nothing was changed (3 file(s)" in text, proc.stdout[-4000:]
    assert "%s: not in the manifest (an extra file)" % EXTRA_REL in text  # T03
    assert "%s: missing from the bundle directory" % EINOPS_REL in text  # T02
    assert "%s: sha256 " % TORCH_REL in text  # T01
    assert "Read the host, check it and plan the work" not in proc.stdout  # stopped before any host is read
    assert snapshot(*watched(host) + [out]) == before and git_status() == git_before


def test_playbook_t09_t10_t11_t15_bad_sha256_variables_are_refused_by_validation(tmp_path, template_venv):
    host = make_host(tmp_path, template_venv, "index", torch=False, components=["cuda_libs", "pytorch"])
    git_before, before = git_status(), snapshot(*watched(host))
    proc = spark(host, "-e", json.dumps({
        "sparkforge_cuda_keyring_sha256": "a" * 63,
        "sparkforge_cusparselt_sha256": {"0.8.1": {"ubuntu2404": {"arm64": "not-hex"}}},
        "sparkforge_cuda_keyring_sha256_map": {"1.1-1": {"ubuntu2404": {"sbsa": "xyz"}}}}))
    text = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "sparkforge_cuda_keyring_sha256: '%s' is not a sha256 (64 hexadecimal digits)" % ("a" * 63) in text  # T10
    assert "sparkforge_cusparselt_sha256: ['0.8.1']['ubuntu2404']['arm64'] is 'not-hex', not a sha256" in text  # T11
    assert "sparkforge_cuda_keyring_sha256_map: ['1.1-1']['ubuntu2404']['sbsa'] is 'xyz', not a sha256" in text  # T15
    assert snapshot(*watched(host)) == before and git_status() == git_before


def test_playbook_t08_w01_t16_unproven_keyring_truncated_wheel_and_bad_proxy_stop_preflight(tmp_path, template_venv):
    host = make_host(tmp_path, template_venv, "wheelhouse", torch=False, components=["cuda_libs", "pytorch"])
    truncate(make_wheel(host["wheelhouse"], HOST_TORCH))
    git_before, before = git_status(), snapshot(*watched(host))
    # Probing off (make_host), plain http to a mirror and an empty pin map: the keyring is unproven.
    proc = spark(host, "-e", json.dumps({"sparkforge_cuda_repo_url": "http://mirror.example/cuda",
                                         "sparkforge_cuda_keyring_sha256_map": {},
                                         "sparkforge_dev_libraries": "always"}),
                 env={"https_proxy": "proxy:3128"})
    text = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "Preflight found 3 problem(s) on localhost; nothing was changed." in text, proc.stdout[-4000:]
    assert "cuda_libs: cuda-keyring is refused: http://mirror.example/cuda/" in text and \
        "is plain http and no sha256 to check the download against" in text  # T08
    assert "%s is not a valid zip (truncated or not a wheel" % HOST_TORCH in text  # W01
    assert "the host's environment variable https_proxy='proxy:3128' is not a proxy URL" in text  # T16
    assert snapshot(*watched(host)) == before and git_status() == git_before


@pytest.mark.parametrize("row", ["T19"])
def test_t19_probing_reads_a_pinned_keyring_and_refuses_a_changed_mirror_copy(row):
    import http.server
    import threading

    class Mirror(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"a changed keyring")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = "http://127.0.0.1:%d/cuda" % server.server_address[1]
        args = dict(plan_args(["cuda_libs", "pytorch"]), probe_sources=True)
        args["sources"] = dict(args["sources"], cuda_repo_url=base, cuda_keyring_sha256=sha(b"the keyring"))
        result, rc = run_module("stack_plan", args, env=env_without_proxies())
    finally:
        server.shutdown()
    assert rc == 0 and not result["ready"], result
    messages = [p["message"] for p in result["problems"]]
    assert "cuda_libs: cuda-keyring is refused: %s/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb has sha256 %s, the pin " \
           "(sparkforge_cuda_keyring_sha256) is %s" % (base, sha(b"a changed keyring"), sha(b"the keyring")) in messages, \
        messages  # T19


@pytest.mark.parametrize("row", ["T20"])
def test_t20_a_changed_wheel_in_the_fleet_wheelhouse_is_refused_before_it_is_copied(tmp_path, template_venv, row):
    """The class's install (roles/fleet_install/tasks/class_wheels.yml) on this machine: the controller's
    copy of a published wheel changed since its builder published it."""
    house = tmp_path / "fleet-wheelhouse" / "c1" / "einops-key"
    house.mkdir(parents=True)
    published = make_wheel(house, "einops-0.8.1-py3-none-any.whl")
    with open(published, "rb") as handle:
        published_sha = sha(handle.read())
    flip(house, "einops-0.8.1-py3-none-any.whl")
    with open(published, "rb") as handle:
        changed_sha = sha(handle.read())
    venv = tmp_path / "venv"
    subprocess.run(["cp", "-a", str(template_venv), str(venv)], check=True)
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False, "vars": {
        "ansible_python_interpreter": sys.executable,
        "sparkforge_venv": str(venv), "sparkforge_fleet_wheelhouse": str(tmp_path / "fleet-wheelhouse"),
        "sparkforge_fleet_pip_extra_args": "", "sparkforge_host_generation_file": str(tmp_path / "generation.json"),
        "fleet_install_target_dir": str(tmp_path / "host-wheels"),
        "fleet_install_target": {"lineage": "l1", "class": "c1", "number": 1, "reason": "upgrade"},
        "fleet_install_wheel_list": [{"name": "einops", "file": "einops-0.8.1-py3-none-any.whl",
                                      "sha256": published_sha, "dir": "einops-key", "version": "0.8.1"}]},
        "tasks": [{"ansible.builtin.include_role": {"name": "sparkforge.stack.fleet_install",
                                                    "tasks_from": "class_wheels.yml"}}]}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    git_before, before = git_status(), snapshot(tmp_path / "fleet-wheelhouse", venv)
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("PIP_"))
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", PIP_CONFIG_FILE=os.devnull,
               PIP_NO_INDEX="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(path)], cwd=REPO, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)
    text = flat(proc.stdout)
    assert proc.returncode == 2, proc.stdout[-4000:]
    assert "%s has sha256 %s, its builder published %s (sparkforge_fleet_wheelhouse)" % (
        published, changed_sha, published_sha) in text, proc.stdout[-4000:]  # T20
    assert not (tmp_path / "host-wheels").exists() and not (tmp_path / "generation.json").exists()
    assert snapshot(tmp_path / "fleet-wheelhouse", venv) == before and git_status() == git_before
