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

import hashlib
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

try:
    from urllib.parse import urlparse
except ImportError:  # pragma: no cover - Python 2
    from urlparse import urlparse

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cusparselt
from ansible_collections.sparkforge.stack.plugins.module_utils.host.platforms import cuda_distro

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


SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def sha256_variable(item):
    """The variable that pins a downloaded file's sha256."""
    return "sparkforge_cuda_keyring_sha256" if item["component"] == "cuda_libs" else "sparkforge_cusparselt_sha256"


def problems_of(item):
    """What is wrong with a source before any network is used, probing or not.

    A single file fetched by URL (the cuda-keyring, the cuSPARSELt local-repo installer: each installs
    a repository's signing key, a root of trust) is proven by TLS or by a pinned sha256: https, or a
    valid sha256 (64 hex digits) for plain http, a file:// URL or a path. A repository (a URL ending in
    /) is signed by that key and may come over anything."""
    if item["kind"] != "http" or item["url"].endswith("/"):
        return None
    sha = item.get("sha256") or ""
    variable = sha256_variable(item)
    if sha and not SHA256_RE.match(str(sha)):
        return "its pinned sha256 %r (%s) is not 64 hexadecimal digits" % (sha, variable)
    if sha:
        return _local_file_differs(item, sha.lower(), variable)
    scheme = urlparse(item["url"]).scheme
    if scheme == "https":
        return None
    if scheme == "http":
        return ("%s is plain http and no sha256 to check the download against: use https, or set the file's "
                "sha256 (%s)" % (item["url"], variable))
    if scheme == "file" or not scheme:
        return ("%s is a local file with no sha256 pinned: a repository key from a path is trusted only "
                "with its sha256 (%s)" % (item["url"], variable))
    return "%s is neither https nor pinned by a sha256 (%s)" % (item["url"], variable)


# The proxy variables urllib, pip, git and apt read (lower case wins where both are set).
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
PROXY_SCHEMES = ("http", "https", "socks4", "socks4a", "socks5", "socks5h")


def proxy_problems(environ):
    """One message per malformed proxy variable of ``environ``, naming it and its value: a proxy is
    scheme://host[:port] (a value without a scheme is read differently by each tool, and a probe
    through it would blame the mirror instead)."""
    out = []
    for name in PROXY_VARIABLES:
        value = environ.get(name)
        if value is None or value.strip() == "":
            continue
        parsed = urlparse(value.strip())
        why = None
        if parsed.scheme not in PROXY_SCHEMES or not parsed.netloc:
            why = "is not a proxy URL like http://proxy.example:3128 (scheme %s, then host and port)" % "/".join(
                PROXY_SCHEMES[:2])
        else:
            try:
                port = parsed.port
            except ValueError:
                port = -1
            if not parsed.hostname or port == -1 or (port is not None and not 0 < port < 65536):
                why = "has no valid host and port (http://proxy.example:3128)"
        if why:
            out.append("the host's environment variable %s=%r %s" % (name, value, why))
    return out


def _local_file_differs(item, sha, variable):
    """A pinned file on a local path (a mirror on disk) is hashed here, before anything changes."""
    path = _local_path(item["url"])
    if path is None:
        return None
    if not os.path.isfile(path):
        return "%s does not exist" % path
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha:
        return "%s has sha256 %s, the pin (%s) is %s" % (path, digest.hexdigest(), variable, sha)
    return None


def unprobed(items):
    """The items as listed without probing; the refusals of problems_of stand all the same."""
    out = []
    for item in items:
        bad = problems_of(item)
        out.append(dict(item, status="refused", error=bad) if bad else dict(item, status="not probed", error=None))
    return out


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


# The keyring is a few KiB: when probing, its bytes are read and checked against the pin (a mirror's
# changed copy is found before anything changes; the cuSPARSELt installer, hundreds of MiB, is checked
# by its download task before it is installed).
KEYRING_MAX_BYTES = 1 << 20


def probe(items, timeout, opener, workers=8, fetcher=None):
    """Probe every item concurrently; each gets ``status`` (ok, unreachable, refused) and ``error``.

    ``fetcher(url, timeout, limit) -> (bytes or None, error or None)``: reads a pinned cuda-keyring
    over the network to compare it with its pin."""
    def one(item):
        if item["kind"] == "pipconf":
            return dict(item, status="not probed", error=None)
        bad = problems_of(item)
        if bad:
            return dict(item, status="refused", error=bad)
        if fetcher and item["source"] == "cuda-keyring" and item.get("sha256") and _local_path(item["url"]) is None:
            data, error = fetcher(item["url"], timeout, KEYRING_MAX_BYTES)
            if error is not None:
                return dict(item, status="unreachable", error=error)
            got = hashlib.sha256(data).hexdigest()
            if got != str(item["sha256"]).lower():
                return dict(item, status="refused", error="%s has sha256 %s, the pin (%s) is %s" % (
                    item["url"], got, sha256_variable(item), str(item["sha256"]).lower()))
            return dict(item, status="ok", error=None)
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
    if not filled.get("cuda_keyring_sha256"):
        # The manifest's pin for this repository directory (version -> distro -> repository arch).
        pins = maps.get("cuda_keyring_sha256") or {}
        filled["cuda_keyring_sha256"] = ((pins.get(str(filled.get("cuda_keyring_version"))) or {})
                                         .get(filled["cuda_distro"]) or {}).get(filled["cuda_repo_arch"]) or ""
    if "cusparselt_sha256" not in filled:
        table = maps.get("cusparselt_sha256") or {}
        filled["cusparselt_sha256"] = ((table.get(str(filled.get("cusparselt_version"))) or {})
                                       .get(filled["cusparselt_distro"]) or {}).get(filled["deb_arch"]) or ""
    return filled
