# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: the one place every user-set variable is checked, RULES and the checkers they name;
# the table and its checkers in two files would be one fact in two places.
"""Every user-set variable checked in one place, before anything changes on a host.

The roles' ``meta/argument_specs.yml`` are the list of variables and give each its type
(``str``, ``path``, ``list``, ``dict``, ``bool``, ``int``, ``float``, ``raw``), its list elements and
its choices.  ``RULES`` adds what a type alone does not say: absolute paths, URLs, git remotes,
versions, ranges, the known components.  ``check`` returns the values normalised (a list given as a
comma-separated string, as ``-e name=a,b`` gives it, split; ``"yes"`` for a bool made ``True``) and
one error per bad variable, each naming the variable and what it got.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import os
import math
import re
import unicodedata

from ansible_collections.sparkforge.stack.plugins.module_utils._common import path_rules
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import arch

# The stack's components, in the order the plays run them: the one list.  preflight's plan imports it; the
# manifest's default sparkforge_components and the plays' `'<name>' in sparkforge_components` gates are YAML
# and cannot import it, so tests/unit/plugins/module_utils/test_components.py checks them against it.
COMPONENTS = ("cuda_libs", "cusparselt", "llvm", "triton", "pytorch", "torch_domains",
              "ml_packages", "runtime_env", "verify")

BOOL_TRUE = ("true", "yes", "on", "1", "y", "t")
BOOL_FALSE = ("false", "no", "off", "0", "n", "f")

VERSION = re.compile(r"^\d+(\.\d+){1,3}$", re.ASCII)
RELEASE = re.compile(r"^\d+\.\d+\.\d+$", re.ASCII)
URL = re.compile(r"^(https?|file)://[^\s]+$", re.ASCII)
GIT_URL = re.compile(r"^((https?|ssh|git|file)://[^\s]+|[\w.-]+@[\w.-]+:[^\s]+)$", re.ASCII)
SHA256 = re.compile(r"^[0-9a-fA-F]{64}$", re.ASCII)
PERCENT = re.compile(r"^\d+(\.\d+)?%$", re.ASCII)
GENERATION = re.compile(r"^[1-9]\d*$", re.ASCII)
# Every pattern is ASCII-only: Python's \d also matches full-width and other Unicode digits ("２.11.0").
DIGITS = re.compile(r"^[0-9]+$", re.ASCII)
KEYRING = re.compile(r"^\d+(\.\d+)*(-\d+)?$", re.ASCII)
ARCH_SPLIT = re.compile(r"[;\s,]+", re.ASCII)
ARCH_GAP = re.compile(r"[;\s,]{2,}|^[;\s,]|[;\s,]$", re.ASCII)
# Characters no path is made with: a newline or tab (a command substitution's trailing newline, a pasted
# line), which every shell step and log line would split.
CONTROL = re.compile(r"[\x00-\x1f\x7f]", re.ASCII)

# SYSTEM_DIRS (what a venv, prefix, build, wheel or report path never is itself) and the rule are in
# _common/path_rules.py, shared with each host's check of the resolved path (paths_usable).
# What nothing may be created in (validate_vars and the Python API ask validate for it).
protected_dirs = path_rules.protected_dirs
# Paths that are read, not created (a root the fabric role reads, an interpreter, a CUDA install): exempt from the
# system-directory and inside-the-checkout rules (cluster_fabric_root is / on a real host).
READ_PATHS = ("cluster_fabric_sysfs_root", "cluster_fabric_proc_root", "cluster_fabric_root", "sparkforge_cuda_home",
              "fleet_build_cuda_home", "torch_domains_cuda_home", "verify_python", "xhost_python", "triton_ptxas_path",
              "runtime_env_ptxas_path", "triton_json_syspath", "xhost_node_health_proc_root")
# Beside the project's own prefix: the variables of cluster.yml and xhost.yml; each role's name is a prefix too.
PREFIXES = ("sparkforge_", "cluster_", "xhost_")
# What the preflight role passes for a variable that is not set anywhere (skipped, as None is).
UNSET = "__unset__"

# What a variable's type does not say.  kind: path (absolute), url (http/https/file), git (a git
# remote: URL, user@host:path or an absolute path), version (dotted numbers), release (major.minor.patch),
# sha256, arch_list
# (TORCH_CUDA_ARCH_LIST), jobs (auto or a count), serial (a count or a percentage).
# empty: the empty string is allowed (it means "default" or "none" for that variable).
RULES = {
    # An empty list installs nothing while the run says it provisioned: refused (-e sparkforge_components=$UNSET).
    "sparkforge_components": {"choices": COMPONENTS, "nonempty": True},
    "preflight_supported_distributions": {"nonempty": True},
    # Empty: no profile, only ml_packages_packages (the role's documented meaning).
    "sparkforge_ml_profile": {"empty": True},
    "ml_packages_profile": {"empty": True},
    "sparkforge_torch_version": {"kind": "release", "also": ("latest",)},
    "pytorch_version": {"kind": "release", "also": ("latest",)},
    "torch_domains_version": {"kind": "release", "also": ("latest",)},
    "triton_torch_version": {"kind": "release", "also": ("latest",)},
    "triton_version": {"kind": "release", "empty": True},
    "llvm_version": {"kind": "int_string", "empty": True, "min": 10, "max": 99},
    "cusparselt_version": {"kind": "version"},
    "cuda_libs_keyring_version": {"kind": "keyring"},
    "preflight_min_python": {"kind": "version"},
    "preflight_min_driver_blackwell": {"kind": "version_or_int"},
    "sparkforge_cuda_major": {"min": 11, "max": 20},
    "sparkforge_cuda_minor": {"kind": "version"},
    # A minute to thirty days: shorter would take over the lock of a run still going on another controller.
    "sparkforge_lock_lease": {"min": 60, "max": 2592000},
    "sparkforge_cuda_arch_list": {"kind": "arch_list", "empty": True},
    "sparkforge_torch_index_url": {"kind": "url"},
    "pytorch_index_url": {"kind": "url"},
    "torch_domains_index_url": {"kind": "url"},
    "sparkforge_cuda_repo_url": {"kind": "url"},
    "cuda_libs_repo_url": {"kind": "url"},
    "sparkforge_cusparselt_base_url": {"kind": "url"},
    "cusparselt_base_url": {"kind": "url"},
    "ml_packages_index_url": {"kind": "url", "empty": True},
    "ml_packages_extra_index_urls": {"kind": "url"},
    "sparkforge_bundle_pip_index_url": {"kind": "url", "empty": True},
    "sparkforge_pytorch_repo_url": {"kind": "git"},
    "sparkforge_triton_repo_url": {"kind": "git"},
    "sparkforge_llvm_repo_url": {"kind": "git"},
    "sparkforge_torchvision_repo_url": {"kind": "git"},
    "sparkforge_torchaudio_repo_url": {"kind": "git"},
    "pytorch_repo": {"kind": "git"},
    "triton_repo": {"kind": "git"},
    "triton_llvm_repo": {"kind": "git"},
    "cuda_libs_keyring_sha256": {"kind": "sha256", "empty": True},
    "cusparselt_sha256": {"kind": "sha256", "empty": True},
    "sparkforge_cuda_keyring_sha256": {"kind": "sha256", "empty": True},
    # version -> distro -> arch -> sha256: every leaf 64 hex digits.
    "sparkforge_cuda_keyring_sha256_map": {"kind": "sha256_map"},
    "sparkforge_cusparselt_sha256": {"kind": "sha256_map"},
    "pytorch_wheelhouse": {"kind": "path_or_url"},
    "triton_wheelhouse": {"kind": "path_or_url"},
    "torch_domains_wheelhouse": {"kind": "path_or_url"},
    "sparkforge_bundle": {"kind": "path", "empty": True},
    "sparkforge_bundle_out": {"kind": "path", "empty": True},
    "sparkforge_fleet_wheelhouse": {"kind": "path"},
    "cusparselt_download_dir": {"kind": "path", "empty": True},
    "runtime_env_ptxas_path": {"kind": "path"},
    "pytorch_jobs": {"kind": "jobs", "min": 1, "max": 1024},
    "triton_jobs": {"kind": "jobs", "min": 1, "max": 1024},
    "torch_domains_jobs": {"min": 1, "max": 1024},
    "fleet_build_domain_jobs": {"min": 1, "max": 1024},
    "sparkforge_rollback_to": {"kind": "generation", "empty": True},
    "fleet_rollback_to": {"kind": "generation", "empty": True},
    "cluster_fabric_subnet": {"kind": "cidr", "empty": True},
    # fabric_netplan's apply_command: empty skips applying (a host whose netplan is applied otherwise).
    "cluster_fabric_apply_command": {"empty": True},
    "cluster_fabric_mtu": {"min": 576, "max": 65520},
    "sparkforge_fabric_mtu": {"min": 576, "max": 65520},
    # As fabric_netplan's confirm_timeout: 0 is "no timer" (test_validate_schemas.py compares the two).
    "cluster_fabric_confirm_timeout": {"min": 0, "max": 3600},
    "cluster_fabric_slots": {"min": 1, "max": 1024},
    # ib_write_bw -D per direction, and the first of one TCP port per twin (fabric_rdma_bw checks the same).
    "cluster_fabric_rdma_bw_duration": {"min": 1, "max": 60},
    "cluster_fabric_rdma_bw_port": {"min": 1, "max": 65527},
    "cuda_libs_cache_valid_time": {"min": 0, "max": 31536000},
    "llvm_apt_cache_valid_time": {"min": 0, "max": 31536000},
    "triton_apt_cache_valid_time": {"min": 0, "max": 31536000},
    "offline_bundle_make_timeout": {"min": 1, "max": 86400},
    "triton_poll_max_prints": {"min": 1, "max": 100000},
    "xhost_link_speed_gbps": {"min": 0.001, "max": 100000},
    "xhost_master_port": {"min": 1, "max": 65535},
    "xhost_iters": {"min": 1, "max": 100000},
    "xhost_join_timeout": {"min": 1, "max": 86400},
    "xhost_op_timeout": {"min": 1, "max": 86400},
    "xhost_min_link_fraction": {"min": 0.0, "max": 1.0},
    "xhost_min_gbs": {"min": 0.0, "max": 100000},
    "xhost_min_busbw_fraction": {"min": 0.0, "max": 1.0},
    "xhost_max_memory_fraction": {"min": 0.01, "max": 0.9},
    "xhost_collective_iters": {"min": 1, "max": 100000},
    "xhost_warmup_iters": {"min": 0, "max": 100000},
    "xhost_max_message_bytes": {"min": 4, "max": 1099511627776},
    "xhost_rated_link_gbps": {"min": 0.001, "max": 100000},
    "xhost_screen_min_nodes": {"min": 6, "max": 100000},
    "sparkforge_probe_timeout": {"min": 1, "max": 600},
    "preflight_min_ram_gib": {"min": 0, "max": 65536},
    "preflight_min_ram_gib_source_build": {"min": 0, "max": 65536},
    "preflight_min_disk_gib": {"min": 0, "max": 1048576},
    "preflight_min_disk_gib_source_build": {"min": 0, "max": 1048576},
    "pytorch_build_timeout": {"min": 60, "max": 604800},
    "pytorch_build_poll": {"min": 1, "max": 86400},
    "pytorch_build_poll_max": {"min": 1, "max": 86400},
    "pytorch_acceptance_max_failed": {"min": 0, "max": 100000},
    "triton_build_timeout_s": {"min": 60, "max": 604800},
    "triton_poll_interval_s": {"min": 1, "max": 86400},
    "sparkforge_fleet_generations_keep": {"min": 1, "max": 1000},
    "sparkforge_rollout_max_failures": {"min": 1, "max": 100000},
    "sparkforge_max_fail_percentage": {"min": 0, "max": 100},
    "sparkforge_serial": {"kind": "serial"},
    "verify_timeout": {"min": 1, "max": 604800},
    "verify_gemm_size": {"min": 1, "max": 65536},
    "verify_bench_scale": {"min": 0.01, "max": 100},
    "verify_collective_iters": {"min": 1, "max": 100000},
    "cuda_libs_lock_timeout": {"min": 0, "max": 86400},
    "cusparselt_lock_timeout": {"min": 0, "max": 86400},
}

# Kinds by the end of a variable's name, for a variable RULES does not name (checked in order).
NAME_KINDS = (
    ("_cuda_arch_list", {"kind": "arch_list", "empty": True}),
    ("_find_links", {"kind": "path_or_url"}),
    ("_sha256", {"kind": "sha256", "empty": True}),
    # An environment for a command (ml_packages_env, pytorch_extra_env): NAME: scalar.
    ("_env", {"kind": "env_map"}),
)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$", re.ASCII)


def implied_rule(name):
    """The rule a variable that RULES does not name takes from the end of its name (a role's own copy of a plan
    input: a name ending in _cuda_arch_list is read as sparkforge_cuda_arch_list is); {} when none."""
    if "kind" in RULES.get(name, {}):
        return {}
    for suffix, implied in NAME_KINDS:
        if name.endswith(suffix):
            return dict(implied)
    return {}


# Variables no role's argument_specs lists (play keywords, controller settings, manifest sources); their
# types.  The preflight role's _preflight_extra_names lists the same names.
EXTRA_SPECS = {
    "sparkforge_serial": {"type": "raw"},
    "sparkforge_max_fail_percentage": {"type": "int"},
    "sparkforge_fleet_wheelhouse": {"type": "str"},
    "sparkforge_fleet_report_dir": {"type": "str"},
    "sparkforge_reports_dir": {"type": "str"},
    "sparkforge_fleet_generations_keep": {"type": "int"},
    "sparkforge_rollout_max_failures": {"type": "int"},
    "sparkforge_fleet_pip_env": {"type": "dict"},
    "sparkforge_fleet_pip_extra_args": {"type": "str"},
    "sparkforge_host_generation_file": {"type": "path"},
    "sparkforge_torch_index_url": {"type": "str"},
    "sparkforge_cuda_repo_url": {"type": "str"},
    "sparkforge_cusparselt_base_url": {"type": "str"},
    "sparkforge_triton_repo_url": {"type": "str"},
    "sparkforge_llvm_repo_url": {"type": "str"},
    "sparkforge_cuda_keyring_sha256": {"type": "str"},
    "sparkforge_cuda_keyring_sha256_map": {"type": "dict"},
    "sparkforge_cusparselt_sha256": {"type": "dict"},
    # The generation `rollback.yml` goes back to (fleet_rollback_to's default).
    "sparkforge_rollback_to": {"type": "raw"},
    # What the Python API passes to every run.
    "sparkforge_run_id": {"type": "str"},
    "sparkforge_plan_only": {"type": "bool"},
    # cluster.yml's and xhost.yml's play-level settings.
    "cluster_group": {"type": "str"},
    "cluster_runtime_env": {"type": "bool"},
    "cluster_xhost_env": {"type": "dict"},
    "xhost_group": {"type": "str"},
    # Host variables the fabric role reads (cluster_fabric_interface's and cluster_fabric_mtu's defaults).
    "sparkforge_fabric_interface": {"type": "str"},
    "sparkforge_fabric_mtu": {"type": "int"},
    # fleet_build_domain_extra_env's default.
    "torch_domains_extra_env": {"type": "dict"},
}

# Variables a module of the collection sets (its ansible_facts), which no task file names.
INTERNAL_NAMES = ("sparkforge_bundle_env",)

# A type that YAML or -e gives in other clothes: these messages say what to write instead.
TYPE_WORDS = {"str": "a string", "path": "a path", "list": "a list", "dict": "a mapping", "bool": "true or false",
              "int": "a whole number", "float": "a number"}


class Invalid(Exception):
    pass


def show(value):
    """What the variable got, as a person would write it."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 160 else repr(value[:157] + "...")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return "%s (%s)" % (value, type(value).__name__)


def split_list(value):
    """A list as given: a list, or a comma-separated string (what ``-e name=a,b`` gives)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",")]
        if len(parts) > 1 and not all(parts):
            # "pytorch,,triton" or "pytorch," (-e name=a,$UNSET): a name was meant there and none came.
            raise Invalid("%s has an empty entry between commas: give each name, as a,b" % show(value))
        return [part for part in parts if part]
    raise Invalid("expected a list (or a comma-separated string), got %s" % show(value))


def to_bool(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_TRUE + BOOL_FALSE:
        return value.strip().lower() in BOOL_TRUE
    raise Invalid("expected true or false, got %s" % show(value))


def to_number(value, kind, rule):
    if isinstance(value, bool):
        raise Invalid("expected %s, got %s" % (TYPE_WORDS[kind], show(value)))
    number = value
    if isinstance(value, str):
        try:
            number = int(value.strip()) if kind == "int" else float(value.strip())
        except ValueError:
            raise Invalid("expected %s, got %s" % (TYPE_WORDS[kind], show(value)))
    elif kind == "int" and isinstance(value, float):
        if value != int(value):
            raise Invalid("expected a whole number, got %s" % show(value))
        number = int(value)
    elif not isinstance(value, (int, float)):
        raise Invalid("expected %s, got %s" % (TYPE_WORDS[kind], show(value)))
    return in_range(number, value, rule)


def in_range(number, value, rule):
    """``number`` (what ``value`` was given as) within the rule's min and max."""
    low, high = rule.get("min"), rule.get("max")
    if isinstance(number, float) and math.isnan(number):
        # NaN (YAML .nan, -e x=nan) compares false with every bound, so a range alone would let it through.
        raise Invalid("%s is not a number (NaN): give a number from %s to %s" % (show(value), low, high))
    if low is not None and number < low or high is not None and number > high:
        bounds = ("from %s to %s" % (low, high) if high is not None else "at least %s" % low) if low is not None \
            else "at most %s" % high
        raise Invalid("%s is out of range (%s)" % (show(value), bounds))
    return number


# Kinds of string a YAML number stands for (llvm_version: 18, triton_jobs: 8, fleet_rollback_to: 2).
INT_AS_STRING = ("version_or_int", "int_string", "jobs", "generation", None)


def check_string(value, kind, rule):
    """A string of a kind; returns it (stripped of nothing: the value is used as given)."""
    if kind in ("version", "release", "version_or_int") and isinstance(value, float):
        raise Invalid("got the number %s: YAML read a version as a number; quote it (\"%s\")" % (value, value))
    if isinstance(value, int) and not isinstance(value, bool) and kind in INT_AS_STRING:
        value = str(value)
    if not isinstance(value, str):
        raise Invalid("expected a string, got %s" % show(value))
    if value == "" and rule.get("empty"):
        return value
    if value in rule.get("also", ()):
        return value
    if kind == "path":
        if not value.startswith("/"):
            raise Invalid("%s is not an absolute path: give the full path, starting with /" % show(value))
        check_path(value, rule)
    elif kind == "path_or_url":
        if not (value.startswith("/") or URL.match(value)):
            raise Invalid("%s is neither an absolute path nor an http(s)/file URL" % show(value))
    elif kind == "url":
        if not URL.match(value):
            raise Invalid("%s is not an http://, https:// or file:// URL" % show(value))
    elif kind == "git":
        if not (GIT_URL.match(value) or value.startswith("/")):
            raise Invalid("%s is not a git remote (an https/ssh/git/file URL, user@host:path or an absolute path)"
                          % show(value))
    elif kind == "version":
        if not VERSION.match(value):
            also = "".join(" or %r" % a for a in rule.get("also", ()))
            raise Invalid("%s is not a version like 2.11.0%s" % (show(value), also))
    elif kind == "release":
        if not RELEASE.match(value):
            also = "".join(" or %r" % a for a in rule.get("also", ()))
            raise Invalid("%s is not a release like 2.11.0 (major.minor.patch)%s" % (show(value), also))
    elif kind == "version_or_int":
        if not (VERSION.match(value) or DIGITS.match(value)):
            raise Invalid("%s is not a version like 580 or 580.95" % show(value))
    elif kind == "int_string":
        if not DIGITS.match(value):
            raise Invalid("%s is not a number like 18" % show(value))
        to_number(int(value), "int", rule)
    elif kind == "keyring":
        if not KEYRING.match(value):
            raise Invalid("%s is not a cuda-keyring version like 1.1-1" % show(value))
    elif kind == "sha256":
        if not SHA256.match(value):
            raise Invalid("%s is not a sha256 (64 hexadecimal digits)" % show(value))
    elif kind == "arch_list":
        try:
            arch.parse_list(value, allow_empty=False)
        except arch.ArchError as exc:
            raise Invalid("%s is not a TORCH_CUDA_ARCH_LIST like \"9.0;12.1\" (bad: %s)"
                          % (show(value), ", ".join(exc.bad) or "empty"))
        archs = [a for a in ARCH_SPLIT.split(value.strip()) if a]
        # Each consumer splits the list its own way (torch's cpp_extension turns each space into ';' and
        # refuses the empty entry two separators make); a target twice is a typo of another.
        twice = sorted(set(a for a in archs if archs.count(a) > 1))
        if twice:
            raise Invalid("%s lists %s more than once: give each target once" % (show(value), ", ".join(twice)))
        if value != value.strip() or ARCH_GAP.search(value):
            raise Invalid("%s has an empty entry (two separators in a row, or one at an end): separate the "
                          "targets with one ';' (%s)" % (show(value), ";".join(archs)))
    elif kind == "jobs":
        if value != "auto" and not (DIGITS.match(value) and int(value) >= 1):
            raise Invalid("%s is neither 'auto' nor a count of at least 1" % show(value))
        if value != "auto":
            in_range(int(value), value, rule)
    elif kind == "generation":
        if not GENERATION.match(value.strip()):
            raise Invalid("%s is not a generation number (1, 2, ...)" % show(value))
    elif kind == "cidr":
        if "/" not in value:
            raise Invalid("%s has no prefix length: give a prefix, e.g. %s/24" % (show(value), value.strip()))
        try:
            ipaddress.ip_network(u"%s" % value.strip(), strict=True)
        except ValueError as exc:
            raise Invalid("%s is not a network like 192.168.100.0/24: %s" % (show(value), exc))
    elif kind == "serial":
        if not (DIGITS.match(value) and int(value) >= 1 or PERCENT.match(value) and 0 < float(value[:-1]) <= 100):
            raise Invalid("%s is neither a count of at least 1 nor a percentage like 25%%" % show(value))
    if rule.get("choices") and value not in rule["choices"]:
        raise Invalid("%s is not one of %s" % (show(value), ", ".join(rule["choices"])))
    return value


def check_sha256_map(value, where=()):
    """Every leaf of a nested mapping (version -> distro -> arch -> digest) is a sha256."""
    for key in sorted(value, key=str):
        item = value[key]
        path = where + (str(key),)
        if isinstance(item, dict):
            check_sha256_map(item, path)
        elif not (isinstance(item, str) and SHA256.match(item)):
            raise Invalid("[%s] is %s, not a sha256 (64 hexadecimal digits)"
                          % ("][".join(repr(p) for p in path), show(item)))


def check_env_map(value):
    """An environment: each name a shell variable name, each value a string or number (a null value became the
    text 'None' in the command's environment; a list or mapping, its repr)."""
    for key in sorted(value, key=str):
        item = value[key]
        if not (isinstance(key, str) and ENV_NAME.match(key)):
            raise Invalid("%s is not an environment variable name (letters, digits and _, not first a digit)"
                          % show(key))
        if item is None or isinstance(item, (dict, list, tuple)):
            raise Invalid("%s is %s: give its value as a string (\"\" for empty), or remove it"
                          % (key, "null" if item is None else show(item)))


def check_path(value, rule):
    """A path where something is created: normalised, not a system directory, not inside the collection or
    the checkout (``rule["protected"]``: (directory, the part of it that may be written) pairs)."""
    control = CONTROL.search(value)
    if control:
        raise Invalid("%s has the control character %r in it (a newline pasted or left by $(...)?): give the path "
                      "alone, on one line" % (show(value), control.group(0)))
    parts = value.split("/")
    if ".." in parts or "." in parts:
        raise Invalid("%s has '.' or '..' in it: give the path itself (%s)" % (show(value), os.path.normpath(value)))
    if rule.get("read"):
        return
    why = path_rules.place_problem(value, rule.get("protected"))
    if why:
        raise Invalid("%s %s" % (show(value), why))


KIND_WORDS = {"path": "an absolute path", "path_or_url": "an absolute path or an http(s)/file URL",
              "url": "an http(s) or file URL", "git": "a git remote URL", "version": "a version like 2.11.0",
              "release": "a release like 2.11.0", "arch_list": "a TORCH_CUDA_ARCH_LIST like \"9.0;12.1\"",
              "sha256": "a sha256 (64 hexadecimal digits)", "jobs": "'auto' or a count", "cidr": "a network like "
              "192.168.100.0/24", "generation": "a generation number", "serial": "a count or a percentage like 25%"}


def empty_allowed(vtype, spec, rule):
    """Whether an empty value (\"\", [], {}) is one the variable takes."""
    if rule.get("nonempty"):
        return False
    return bool(rule.get("empty") or spec.get("empty") or vtype in ("list", "dict"))


def wanted(spec, rule):
    """What a variable takes, in words (for the messages about an empty value)."""
    if rule.get("choices"):
        return "one of %s" % ", ".join(str(c) for c in rule["choices"])
    kind = rule.get("kind") or ("path" if spec.get("type") == "path" else None)
    if spec.get("type") == "list":
        return "a list (YAML [a, b], or a,b with -e)"
    return KIND_WORDS.get(kind) or TYPE_WORDS.get(spec.get("type"), "a value")


def unicode_digits(value):
    """The non-ASCII digits anywhere in a value (full-width, Arabic-Indic, ...): Python's int(), float() and
    \\d take them, so "２.11.0" would pass as a version and fail later, unclearly."""
    if isinstance(value, str):
        return [c for c in value if ord(c) > 127 and unicodedata.category(c) == "Nd"]
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in unicode_digits(k) + unicode_digits(v)]
    if isinstance(value, (list, tuple)):
        return [c for item in value for c in unicode_digits(item)]
    return []


# A key that names a version (version, versions, nccl_version, min_version): its value is text, never a YAML float.
VERSION_KEY = re.compile(r"(^|_)(versions?|release)$", re.ASCII)


def float_versions(value, where=""):
    """Where, inside mappings and lists, a version-named key holds a float (YAML read `22.10` as 22.1)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            here = "%s[%r]" % (where, key)
            items = item if isinstance(item, (list, tuple)) else [item]
            if VERSION_KEY.search(str(key)) and any(isinstance(i, float) for i in items):
                found.append("%s is %s" % (here, show(item)))
            else:
                found += float_versions(item, here)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found += float_versions(item, "%s[%d]" % (where, index))
    return found


def is_empty(value):
    return isinstance(value, str) and not value.strip() or isinstance(value, (list, tuple)) and not value


def check_one(name, value, spec, protected=()):
    """The value of one variable, normalised; raises Invalid with the reason."""
    spec = dict(spec or {})
    rule = dict(RULES.get(name, {}))
    if isinstance(value, float) and VERSION_KEY.search(name):
        raise Invalid("got the number %s: YAML read a version as a number; quote it" % value)
    floats = float_versions(value)
    if floats:
        raise Invalid("%s: YAML read a version as a number (22.10 becomes 22.1); quote it" % "; ".join(floats))
    odd = unicode_digits(value)
    if odd:
        raise Invalid("%s has the non-ASCII digit(s) %s: type the ASCII digits 0-9" % (
            show(value), ", ".join("%r (U+%04X)" % (c, ord(c)) for c in sorted(set(odd)))))
    rule["protected"] = protected
    rule["read"] = name in READ_PATHS
    if spec.get("choices") and "choices" not in rule:
        rule["choices"] = [str(c) for c in spec["choices"]]
    vtype = spec.get("type", "str")
    kind = rule.get("kind")
    if vtype == "path" and kind is None:
        kind = "path"
    if kind is None and vtype == "str" and (name.endswith("_url") and not name.endswith("_repo_url")):
        kind = "url"
    if kind is None and implied_rule(name):
        rule = dict(implied_rule(name), **rule)
        kind = rule["kind"]
    # Empty where that means nothing: allowed where the rule says so or the role's own default is empty
    # (the argument_specs lookup marks those: "none" or "the default" is what the role documents for it). An
    # empty list or mapping means "none" (no extra wheels, no patches), except where a rule says nonempty.
    if (is_empty(value) or vtype == "list" and isinstance(value, str) and not split_list(value)) \
            and not empty_allowed(vtype, spec, rule):
        raise Invalid("%s is empty: give %s, or leave the variable unset for its default"
                      % (show(value), wanted(spec, rule)))
    if vtype == "bool":
        return to_bool(value)
    if vtype in ("int", "float"):
        return to_number(value, vtype, rule)
    if vtype == "dict":
        if not isinstance(value, dict):
            raise Invalid("expected a mapping (name: value, or JSON {...} with -e), got %s" % show(value))
        if kind == "sha256_map":
            check_sha256_map(value)
        if kind == "env_map":
            check_env_map(value)
        return value
    if vtype == "list":
        items = split_list(value)
        elements = spec.get("elements", "str")
        out = []
        for index, item in enumerate(items):
            if elements in ("str", "path") and isinstance(item, str) and not item.strip():
                # ["einops", ""]: an element left empty names nothing (a trailing comma, an unset variable).
                raise Invalid("element %d of %s is empty: remove it or give %s" % (
                    index, show(value), KIND_WORDS.get(kind, "a value")))
            if elements in ("str", "path"):
                ekind = "path" if elements == "path" else kind
                erule = dict(rule, empty=False)
                try:
                    out.append(check_string(item, ekind, dict(erule, choices=None)))
                except Invalid as exc:
                    raise Invalid("element %s" % exc)
            elif elements == "int":
                out.append(to_number(item, "int", {}))
            elif elements == "dict":
                if not isinstance(item, dict):
                    raise Invalid("element %s is not a mapping" % show(item))
                if spec.get("options"):
                    check_fields(index, item, spec["options"])
                out.append(item)
            else:
                out.append(item)
        choices = rule.get("choices")
        if choices:
            unknown = [item for item in out if item not in choices]
            if unknown:
                raise Invalid("unknown %s (known: %s)" % (", ".join(repr(u) for u in unknown), ", ".join(choices)))
        return out
    if vtype == "raw":
        if kind in ("jobs", "serial", "generation") and isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise Invalid("%s is out of range (at least 1)" % show(value))
            if kind == "jobs":
                to_number(value, "int", rule)
            return value
        if kind == "generation" and isinstance(value, float):
            raise Invalid("%s is not a generation number (1, 2, ...)" % show(value))
        if kind is None:
            return value
        return check_string(value, kind, rule)
    return check_string(value, kind, rule)


def check_fields(index, item, options):
    """An entry of a list of mappings whose fields the argument spec types (``options``): no unknown or missing
    field, each of its type (``versions: 12`` where a list is meant would be iterated, as a number, later)."""
    unknown = sorted(set(item) - set(options), key=str)
    if unknown:
        raise Invalid("element %d has the unknown field(s) %s (known: %s)" % (
            index, ", ".join(repr(k) for k in unknown), ", ".join(sorted(options))))
    for key in sorted(options):
        sub = options[key]
        if key not in item or item[key] is None:
            if sub.get("required"):
                raise Invalid("element %d %s has no %s" % (index, show(item), key))
            continue
        if sub.get("type") == "list" and not isinstance(item[key], (list, tuple)):
            raise Invalid("element %d field %s is %s, not a list: write it as [%s]" % (
                index, key, show(item[key]), show(item[key]).split(" (")[0]))
        try:
            check_one(key, item[key], sub)
        except Invalid as exc:
            raise Invalid("element %d field %s: %s" % (index, key, exc))


def check(values, specs, protected=(), given=None):
    """``values``: variable name -> value (UNSET: not set, skipped); ``specs``: name -> its argument
    spec (type, elements, choices, and ``empty``/``null`` where the role's default is empty/null);
    ``protected``: what protected_dirs returns; ``given``: the names the user set (inventory, group and host
    vars, -e; None: every name of ``values``) - a null among them is refused, a null role default is not.  Returns (normalised values,
    errors); each error is a dict with ``variable``, ``value`` (as shown) and ``message`` ("<variable>:
    <reason>")."""
    merged = dict(EXTRA_SPECS)
    merged.update(specs or {})
    normalised = {}
    errors = []
    for name in sorted(values):
        value = values[name]
        if value == UNSET or value is None and given is not None and name not in given:
            continue
        if value is None:
            # `name:` with nothing after it in YAML is null: set, to nothing (rendered as '' in a task).
            spec = merged.get(name, {"type": "raw"})
            if spec.get("null"):
                continue
            errors.append({"variable": name, "value": "null", "message": "%s: is empty (null: the key has no "
                           "value, as `%s:` in YAML); give %s, or remove the line for the default"
                           % (name, name, wanted(spec, RULES.get(name, {})))})
            continue
        try:
            normalised[name] = check_one(name, value, merged.get(name, {"type": "raw"}), protected)
        except Invalid as exc:
            errors.append({"variable": name, "value": show(value), "message": "%s: %s" % (name, exc)})
    return normalised, errors
