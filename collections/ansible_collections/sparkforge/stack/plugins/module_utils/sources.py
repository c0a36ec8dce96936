# -*- coding: utf-8 -*-
# Copyright: sparkforge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every remote source a host's plan will use, and a probe of each before anything changes.

``plan_sources`` lists them from the plan (only components that will run, only what they fetch)
and the URLs the inventory sets; ``probe`` checks them concurrently with a short timeout, TLS
verified and the proxy environment honoured (urllib reads http_proxy/https_proxy/no_proxy);
``table`` renders host, source, URL, error and the variable that points it at a mirror.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

try:
    from urllib.parse import urlparse
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlparse

from ansible_collections.sparkforge.stack.plugins.module_utils import cusparselt
from ansible_collections.sparkforge.stack.plugins.module_utils.platforms import cuda_distro

# What each component needs when it runs; `variable` is what a site points at its mirror.
GIT_COMPONENTS = (
    ("triton", "triton_repo", "Triton source (git)"),
    ("triton", "llvm_repo", "LLVM source (git)"),
    ("pytorch", "pytorch_repo", "PyTorch source (git)"),
    ("torch_domains", "torchvision_repo", "torchvision source (git)"),
    ("torch_domains", "torchaudio_repo", "torchaudio source (git)"),
)


BUILD_PACKAGES = "Python packages for the builds (pip)"


def _apt_source_present(sources_dir, repo_url, distro, arch):
    """True when an apt source for this CUDA repository (any mirror of compute/cuda/repos) exists."""
    pattern = re.compile(r"(compute/cuda/repos|%s)/%s/%s/?\s"
                         % (re.escape(repo_url.rstrip("/")), re.escape(distro), re.escape(arch)))
    try:
        names = os.listdir(sources_dir)
    except OSError:
        return False
    for name in names:
        if not (name.endswith(".list") or name.endswith(".sources")):
            continue
        try:
            with open(os.path.join(sources_dir, name)) as handle:
                if pattern.search(handle.read() + "\n"):
                    return True
        except (IOError, OSError):
            continue
    return False


def plan_sources(plan, urls, host, apt_sources_dir="/etc/apt/sources.list.d"):
    """[{component, source, url, probe, kind, variable, sha256}] the plan will fetch from.

    ``urls``: the URLs in force on the host (inventory overrides included): cuda_repo_url,
    cuda_distro, cuda_repo_arch, cuda_keyring_version, cuda_keyring_sha256, cusparselt_base_url,
    cusparselt_version, cusparselt_sha256 (hex or ""), deb_arch, triton_repo, llvm_repo,
    pytorch_repo, torchvision_repo, torchaudio_repo, torch_index_url, wheelhouse, ml_index_url,
    ml_extra_index_urls, and the variable name of each (``variables``).
    """
    actions = plan.get("actions") or {}
    names = urls.get("variables") or {}
    out = []

    def add(component, source, url, kind, key, probe=None, sha256=None, ref=None):
        if url:
            item = {"component": component, "source": source, "url": url, "probe": probe or url, "kind": kind,
                    "variable": names.get(key, key), "sha256": sha256 or None, "key": key}
            if kind == "git":
                item["ref"] = ref
            out.append(item)

    if actions.get("cuda_libs") == "install":
        repo = "%s/%s/%s/" % (urls["cuda_repo_url"].rstrip("/"), urls.get("cuda_distro"), urls.get("cuda_repo_arch"))
        add("cuda_libs", "CUDA apt repository", repo, "http", "cuda_repo_url", probe=repo + "Release")
        if not _apt_source_present(apt_sources_dir, urls["cuda_repo_url"], urls.get("cuda_distro"),
                                   urls.get("cuda_repo_arch")):
            add("cuda_libs", "cuda-keyring", repo + "cuda-keyring_%s_all.deb" % urls.get("cuda_keyring_version"),
                "http", "cuda_repo_url", sha256=urls.get("cuda_keyring_sha256"))
    if actions.get("cusparselt") == "install" and urls.get("cusparselt_base_url"):
        version = urls.get("cusparselt_version")
        add("cusparselt", "cuSPARSELt installer",
            cusparselt.deb_url(urls["cusparselt_base_url"], version, urls.get("cusparselt_distro") or urls.get("cuda_distro"),
                               urls.get("deb_arch")),
            "http", "cusparselt_base_url", sha256=urls.get("cusparselt_sha256"))
    torch = plan.get("torch") or {}
    for component, key, label in GIT_COMPONENTS:
        if actions.get(component) == "build":
            add(component, label, urls.get(key), "git", key, ref=git_ref(key, plan, urls))
    builds = [c for c in ("triton", "pytorch", "torch_domains") if actions.get(c) == "build"]
    if builds:
        # What the builds pip-install (build requirements) and the builder resolves (the wheels' dependencies).
        index = (urls.get("build_index_url") or "").rstrip("/")
        if index:
            add(builds[0], BUILD_PACKAGES, index, "index", "build_index_url", probe=index + "/")
        else:
            add(builds[0], BUILD_PACKAGES, "(pip's configuration on the host)", "pipconf", "build_index_url")
    if actions.get("pytorch") == "install" and torch.get("source") == "index":
        index = (urls.get("torch_index_url") or "").rstrip("/")
        add("pytorch", "torch package index", index, "index", "torch_index_url", probe=index + "/torch/")
    if actions.get("pytorch") == "install" and torch.get("source") == "wheelhouse":
        add("pytorch", "torch wheelhouse", urls.get("wheelhouse"), "index", "wheelhouse")
    if actions.get("ml_packages") == "install":
        index = (urls.get("ml_index_url") or "").rstrip("/")
        if index:
            add("ml_packages", "ML package index", index, "index", "ml_index_url", probe=index + "/pip/")
        else:
            # pip's own configuration (pip.conf, PIP_INDEX_URL) decides: nothing to probe from here.
            add("ml_packages", "ML package index", "(pip's configuration on the host)", "pipconf", "ml_index_url")
        for extra in urls.get("ml_extra_index_urls") or []:
            add("ml_packages", "ML extra index", extra, "index", "ml_extra_index_urls",
                probe=extra.rstrip("/") + "/")
    return out


def git_ref(key, plan, urls):
    """The tag or commit a build checks out (what a bundle's mirror must hold); None: read at build
    time (LLVM's commit from Triton's cmake/llvm-hash.txt when the version data has none)."""
    given = urls.get(key.replace("_repo", "_ref"))
    if given:
        return given
    if key == "pytorch_repo":
        return "v%s" % (plan.get("torch") or {}).get("version")
    if key == "triton_repo":
        return "v%s" % (plan.get("triton") or {}).get("version")
    if key == "llvm_repo":
        return (plan.get("triton") or {}).get("llvm_commit") or None
    return "v%s" % plan.get(key.replace("_repo", ""))


def _local_path(url):
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return parsed.path
    if not parsed.scheme and (url.startswith("/") or url.startswith(".")):
        return url
    return None


def problems_of(item):
    """What is wrong with a source before any network is used (plain http without a checksum)."""
    if item["url"].startswith("http://") and item["kind"] == "http" and not item["sha256"] \
            and not item["url"].endswith("/"):
        return ("plain http and no sha256 to check the download against: use https, or set the file's sha256 "
                "(%s)" % ("sparkforge_cuda_keyring_sha256" if item["component"] == "cuda_libs"
                          else "sparkforge_cusparselt_sha256"))
    return None


def probe_one(item, timeout, opener):
    """None when the source answers, else the error text."""
    path = _local_path(item["url"])
    if path is not None:
        return None if os.path.exists(path) else "%s does not exist" % path
    if item["kind"] == "git" and not item["url"].startswith(("http://", "https://")):
        # ssh/git:// remotes: ask git itself, bounded.
        try:
            proc = subprocess.run(["git", "ls-remote", "--heads", item["url"]], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False,
                                  env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        except subprocess.TimeoutExpired:
            return "no answer within %d s" % timeout
        except OSError as exc:
            return "cannot run git: %s" % exc
        return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["git ls-remote failed"])[-1]
    url = item["probe"]
    if item["kind"] == "git":
        url = item["url"].rstrip("/") + "/info/refs?service=git-upload-pack"
    return opener(url, timeout)


def probe(items, timeout, opener, workers=8):
    """Probe every item concurrently; each gets ``status`` (ok, unreachable, refused) and ``error``."""
    def one(item):
        if item["kind"] == "pipconf":
            return dict(item, status="not probed", error=None)
        bad = problems_of(item)
        if bad:
            return dict(item, status="refused", error=bad)
        error = probe_one(item, timeout, opener)
        return dict(item, status="ok" if error is None else "unreachable", error=error)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(one, items))


def table(host, probed):
    """Lines of the sources table a person reads: host, source, URL, error, the variable to change."""
    rows = [("host", "source", "URL", "error", "variable")]
    for p in probed:
        state = p.get("error") or ("bundle: %s" % p["path"] if p.get("path") else p.get("status", "-"))
        rows.append((host, "%s: %s" % (p["component"], p["source"]), p["url"], state, p["variable"]))
    widths = [min(90, max(len(str(r[i])) for r in rows)) for i in range(5)]
    return ["  ".join(str(c)[:90].ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def fill_platform_names(given, host, maps):
    """``given`` (the sources in force) with the host's repository distro and arch names filled in where not given."""
    filled = dict(given)
    arch = host.get("architecture")
    if not maps or not arch:
        return filled
    # No default: a distribution the map does not know is refused by the plan (stack_plan), not sent to
    # another distribution's repository.
    distro = cuda_distro(host.get("distribution"), host.get("distribution_version"),
                         maps.get("cuda_distro_map")) or ""
    deb_arch = (maps.get("cuda_deb_arch_map") or {}).get(arch, arch)
    # A name the inventory sets (cuda_libs_distro, cusparselt_distro...) wins; empty means not set.
    for key, value in (("cuda_distro", distro), ("cuda_repo_arch", (maps.get("cuda_repo_arch_map") or {}).get(arch, arch)),
                       ("deb_arch", deb_arch)):
        if not filled.get(key):
            filled[key] = value
    if not filled.get("cusparselt_distro"):
        filled["cusparselt_distro"] = filled["cuda_distro"]
    if "cusparselt_sha256" not in filled:
        table = maps.get("cusparselt_sha256") or {}
        filled["cusparselt_sha256"] = ((table.get(str(filled.get("cusparselt_version"))) or {})
                                       .get(filled["cusparselt_distro"]) or {}).get(filled["deb_arch"]) or ""
    return filled
