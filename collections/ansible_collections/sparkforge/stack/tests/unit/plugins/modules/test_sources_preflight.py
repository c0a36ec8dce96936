"""Preflight's sources table: every remote source the plan will use, probed before anything changes.

stack_plan runs for real (the module, as preflight runs it) against a local HTTP server that stands
in for a mirror (an apt repository's Release file, a PEP 503 index page, a git smart-HTTP
info/refs), a port nothing listens on (an unreachable mirror), and a proxy that does not answer in
https_proxy. Plan tests: which sources each torch source (source, index, wheelhouse, existing)
needs on a GB10, a GH200 and an x86 H100.
"""

import copy
import hashlib
import http.server
import os
import socket
import threading

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight as pf
from ansible_collections.sparkforge.stack.plugins.module_utils.plan import sources
from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module, shared_manifest

MANIFEST_KEYS = ("sparkforge_cuda_major", "sparkforge_torch_releases", "sparkforge_triton_releases",
                 "sparkforge_torch_arch_min_version", "sparkforge_torch_arch_defaults", "sparkforge_torch_traps",
                 "sparkforge_torch_fixes", "sparkforge_cxx_min_compilers", "sparkforge_torch_wheel_archs",
                 "sparkforge_ml_packages", "sparkforge_ml_profiles", "sparkforge_ml_package_pins")


def facts(name, cc, arch, klass):
    return {"gpus": [{"index": 0, "name": name, "compute_capability": cc, "sm": "sm_" + cc.replace(".", ""),
                      "driver_version": "580.95.05", "memory_mib": 97871, "uuid": "GPU-x", "platform_class": klass}],
            "compute_capabilities": [cc], "sm_archs": ["sm_" + cc.replace(".", "")], "platform_class": klass,
            "cpu": {"arch": arch, "cores": 64, "sve2": arch == "aarch64"},
            "memory": {"total_mib": 500000, "available_mib": 480000},
            "disk": {"/opt/sparkforge/build": {"measured_at": "/opt", "free_mib": 900000, "total_mib": 1900000}},
            "gpu_error": None}


SPARK = facts("NVIDIA GB10", "12.1", "aarch64", "dgx_spark")
GH200 = facts("NVIDIA GH200 480GB", "9.0", "aarch64", "hopper")
H100 = facts("NVIDIA H100 80GB HBM3", "9.0", "x86_64", "hopper")
HOST = {"name": "h1", "distribution": "Ubuntu", "distribution_version": "24.04", "python_version": "3.12.3"}
CHECKS = {"allow_x86_64": True, "supported_distributions": [{"distribution": "Ubuntu", "versions": ["24.04"]}],
          "min_python": "3.10", "require_gpu": True, "min_driver_blackwell": "580", "min_ram_gib": 1,
          "min_ram_gib_source_build": 1, "min_disk_gib": 1, "min_disk_gib_source_build": 1,
          "build_dir": "/opt/sparkforge/build"}


# What the stand-in mirror serves for every known path (the keyring's bytes included).
X_SHA256 = hashlib.sha256(b"x").hexdigest()


def urls(base, **more):
    u = {"cuda_repo_url": base + "/cuda", "cuda_distro": "ubuntu2404", "cuda_repo_arch": "sbsa",
         "cuda_keyring_version": "1.1-1", "cuda_keyring_sha256": "", "cusparselt_version": "0.8.1",
         "cusparselt_base_url": base + "/cusparselt/{version}/", "cusparselt_sha256": "", "deb_arch": "arm64",
         "triton_repo": base + "/triton.git", "llvm_repo": base + "/llvm-project.git",
         "pytorch_repo": base + "/pytorch.git", "torchvision_repo": base + "/vision.git",
         "torchaudio_repo": base + "/audio.git", "torch_index_url": base + "/whl/cu130",
         "wheelhouse": "/nonexistent/wheelhouse", "ml_index_url": base + "/simple", "ml_extra_index_urls": [],
         "build_index_url": base + "/simple",
         "variables": {"cuda_repo_url": "sparkforge_cuda_repo_url", "pytorch_repo": "sparkforge_pytorch_repo_url"}}
    u.update(more)
    return u


class Mirror(http.server.BaseHTTPRequestHandler):
    """Answers what a mirror has: Release, index pages, git info/refs, the installers; 404 otherwise."""
    known = ("/cuda/ubuntu2404/sbsa/Release", "/cuda/ubuntu2404/sbsa/cuda-keyring_1.1-1_all.deb",
             "/whl/cu130/torch/", "/simple/pip/", "/simple/", "/pytorch.git/info/refs", "/triton.git/info/refs",
             "/llvm-project.git/info/refs", "/vision.git/info/refs", "/audio.git/info/refs",
             "/cusparselt/0.8.1/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb")

    def do_GET(self):
        path = self.path.split("?")[0]
        self.send_response(200 if path in self.known else 404)
        self.end_headers()
        if path in self.known:
            self.wfile.write(b"x")

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def mirror():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def plan_args(fx, source, base_urls, components=None, **more):
    m = shared_manifest()
    args = {"facts": fx, "host": HOST, "checks": CHECKS,
            "settings": {"components": components or list(pf.COMPONENTS), "torch_version": "latest",
                         "torch_source": source, "cuda_arch_list": "", "ml_profile": "minimal",
                         "index_url": base_urls["torch_index_url"], "dev_libraries": "auto"},
            "manifest": dict((k, m[k]) for k in MANIFEST_KEYS), "sources": base_urls}
    args.update(more)
    return args


def env_without_proxies(**more):
    env = dict((k, v) for k, v in os.environ.items() if "proxy" not in k.lower())
    env.update(more)
    return env


def by_component(plan):
    return sorted((s["component"], s["source"]) for s in plan["sources"])


def test_a_source_build_on_a_spark_probes_every_source_and_passes_on_a_reachable_mirror(mirror):
    # The keyring .deb comes over plain http here: it needs a sha256, or preflight refuses it; probing
    # reads it (the mirror serves b"x") and checks it against that pin.
    result, rc = run_module("stack_plan", plan_args(SPARK, "source", urls(mirror, cuda_keyring_sha256=X_SHA256,
                                                                          cusparselt_sha256="cd" * 32)),
                            env=env_without_proxies())
    assert rc == 0, result
    assert result["ready"], result["problems"]
    assert by_component(result["plan"]) == [
        ("cuda_libs", "CUDA apt repository"), ("cuda_libs", "cuda-keyring"), ("cusparselt", "cuSPARSELt installer"),
        ("ml_packages", "ML package index"), ("pytorch", "PyTorch source (git)"),
        ("torch_domains", "torchaudio source (git)"), ("torch_domains", "torchvision source (git)"),
        ("triton", "LLVM source (git)"), ("triton", "Python packages for the builds (pip)"),
        ("triton", "Triton source (git)")]
    assert all(s["status"] == "ok" for s in result["plan"]["sources"]), result["plan"]["sources"]
    assert any(line.strip().startswith("host") and "variable" in line for line in result["plan_text"])


def test_an_unreachable_mirror_stops_the_host_with_the_table(mirror):
    dead = "http://127.0.0.1:%d" % free_port()
    u = urls(mirror, pytorch_repo=dead + "/pytorch.git", cuda_keyring_sha256=X_SHA256, cusparselt_sha256="cd" * 32)
    result, rc = run_module("stack_plan", plan_args(SPARK, "source", u), env=env_without_proxies())
    assert rc == 0 and not result["ready"]
    bad = [s for s in result["plan"]["sources"] if s["status"] != "ok"]
    assert [(s["component"], s["variable"]) for s in bad] == [("pytorch", "sparkforge_pytorch_repo_url")], bad
    assert "refused" in bad[0]["error"].lower(), bad
    msg = [p["message"] for p in result["problems"] if p["check"] == "sources"]
    assert msg and "point sparkforge_pytorch_repo_url at a mirror" in msg[0]
    row = [line for line in result["plan_text"] if "pytorch.git" in line and line.lstrip().startswith("h1")][0]
    assert "h1" in row and "sparkforge_pytorch_repo_url" in row


def test_a_dead_proxy_in_https_proxy_is_what_the_error_says():
    u = urls("https://download.example.invalid")
    proxy = "http://127.0.0.1:%d" % free_port()
    result, rc = run_module("stack_plan", plan_args(H100, "index", u, components=["pytorch"]),
                            env=env_without_proxies(https_proxy=proxy, HTTPS_PROXY=proxy))
    assert rc == 0 and not result["ready"]
    (item,) = result["plan"]["sources"]
    assert item["source"] == "torch package index" and item["status"] == "unreachable"
    assert "refused" in item["error"].lower(), item
    assert item["variable"] == "torch_index_url"


def test_plain_http_downloads_without_a_sha256_are_refused(mirror):
    result, rc = run_module("stack_plan", plan_args(SPARK, "source", urls(mirror), components=["cuda_libs", "cusparselt",
                                                                                               "pytorch"]),
                            env=env_without_proxies())
    refused = sorted(s["source"] for s in result["plan"]["sources"] if s["status"] == "refused")
    assert refused == ["cuSPARSELt installer", "cuda-keyring"], result["plan"]["sources"]
    assert any("sparkforge_cusparselt_sha256" in p["message"] for p in result["problems"])
    # The apt repository itself is signed: plain http is fine there.
    assert [s["status"] for s in result["plan"]["sources"] if s["source"] == "CUDA apt repository"] == ["ok"]


def test_probing_off_lists_the_sources_without_probing(mirror):
    dead = "http://127.0.0.1:%d" % free_port()
    result, rc = run_module("stack_plan", dict(plan_args(H100, "index", urls(dead), components=["pytorch"]),
                                               probe_sources=False), env=env_without_proxies())
    assert rc == 0 and result["ready"], result["problems"]
    assert [s["status"] for s in result["plan"]["sources"]] == ["not probed"]
    assert "not probed: sparkforge_probe_sources is false" in "\n".join(result["plan_text"])


@pytest.mark.parametrize("fx", [SPARK, GH200, H100], ids=["gb10", "gh200", "h100"])
@pytest.mark.parametrize("source,expected", [
    ("source", {"cuda_libs", "cusparselt", "triton", "pytorch", "torch_domains", "ml_packages"}),
    ("index", {"pytorch", "ml_packages"}),
    ("wheelhouse", {"pytorch", "ml_packages"}),
    ("existing", {"ml_packages"}),
])
def test_which_components_fetch_for_each_torch_source(fx, source, expected):
    m = copy.deepcopy(shared_manifest())  # build_plan is given it as the module is given its arguments
    config = {"components": list(pf.COMPONENTS), "torch_version": "latest", "torch_source": source,
              "ml_profile": "minimal", "index_url": "https://download.pytorch.org/whl/cu130", "dev_libraries": "auto",
              "python_version": "3.12.3"}
    plan = pf.build_plan(fx, config, m)
    items = sources.plan_sources(plan, urls("https://mirror.example"), HOST, apt_sources_dir="/nonexistent")
    assert {i["component"] for i in items} == expected, items
    git = [i for i in items if i["kind"] == "git"]
    assert bool(git) == (source == "source")


def test_an_existing_cuda_apt_source_needs_no_keyring(tmp_path):
    (tmp_path / "cuda-ubuntu2404-sbsa.list").write_text(
        "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
        "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/ /\n")
    plan = {"actions": {"cuda_libs": "install"}, "torch": {"source": "source"}}
    items = sources.plan_sources(plan, urls("https://mirror.example"), HOST, apt_sources_dir=str(tmp_path))
    assert [i["source"] for i in items] == ["CUDA apt repository"]


def test_without_an_ml_index_url_pips_own_configuration_decides_and_nothing_is_probed():
    plan = {"actions": {"ml_packages": "install"}, "torch": {"source": "existing"}}
    items = sources.plan_sources(plan, urls("https://mirror.example", ml_index_url=""), HOST)
    probed = sources.probe(items, 1, lambda url, timeout: "must not be called")
    assert [(p["url"], p["status"]) for p in probed] == [("(pip's configuration on the host)", "not probed")]


def test_the_cusparselt_installer_follows_its_own_distro_when_one_is_set():
    plan = {"actions": {"cusparselt": "install"}, "torch": {"source": "source"}}
    items = sources.plan_sources(plan, urls("https://mirror.example", cusparselt_distro="ubuntu2204"), HOST)
    assert [i["url"].rsplit("/", 1)[1] for i in items] == ["cusparselt-local-repo-ubuntu2204-0.8.1_0.8.1-1_arm64.deb"]
    items = sources.plan_sources(plan, urls("https://mirror.example"), HOST)
    assert [i["url"].rsplit("/", 1)[1] for i in items] == ["cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_arm64.deb"]


def test_source_builds_list_the_package_index_their_pip_installs_use():
    plan = {"actions": {"pytorch": "build"}, "torch": {"source": "source", "version": "2.10.0"}}
    items = sources.plan_sources(plan, urls("https://mirror.example", build_index_url="https://pypi.example/simple/"),
                                 HOST)
    assert [(i["source"], i["url"], i["kind"]) for i in items] == [
        ("PyTorch source (git)", "https://mirror.example/pytorch.git", "git"),
        ("Python packages for the builds (pip)", "https://pypi.example/simple", "index")]
    assert items[0]["ref"] == "v2.10.0"
    items = sources.plan_sources(plan, urls("https://mirror.example", build_index_url=""), HOST)
    assert items[1]["kind"] == "pipconf" and items[1]["url"] == "(pip's configuration on the host)"
