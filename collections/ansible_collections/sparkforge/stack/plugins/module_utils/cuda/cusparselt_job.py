# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Kept whole: one job (probe, plan, act) of cusparselt_repo, present() alone 150 lines of ordered steps;
# the job shape is reworked by issue 34 item 3.
"""One run of cusparselt_repo: probe what the host has (dpkg, the repo directory, apt sources,
keyring, linker cache), list the actions and the diff, then act (download and check the local
repo .deb, dpkg, apt-get for that source only, ldconfig) with the dpkg/apt lock waited for.

The job has the shape of module_utils/_common/job.py: ``CusparseltJob(params, system, check_mode)``,
``plan()`` (the probe and the actions, downloading and checking the .deb it needs), ``apply(plan)``
(dpkg, the keyring, sources, apt-get, ldconfig).  No Ansible imports: commands and downloads go
through the ``system`` (the module passes AnsibleSystem), so tests drive the job directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import shutil
import tempfile
import time

from ansible_collections.sparkforge.stack.plugins.module_utils.cuda import cusparselt as cl
from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import atomic_write_text, sha256_file
from ansible_collections.sparkforge.stack.plugins.module_utils.cuda.cusparselt import CusparseltError
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import Job, JobError, Plan, output_tail

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LANG": "C", "LC_ALL": "C"}
LISTS_LOCK = "/var/lib/apt/lists/lock"


class CusparseltJob(Job):
    """One run: the plan (``actions``), the diff and the commands.

    ``system`` is the boundary to the host (module_utils/_common/job.py): ``run(cmd, env=None) -> (rc, out, err)``,
    ``fetch(url, timeout) -> (response or None, info)`` (fetch_url's shape), ``warn(msg)`` and
    ``which(name, opt_dirs)``.
    """

    def __init__(self, params, system, check_mode=False):
        Job.__init__(self, params, system, check_mode)
        self.actions = []
        self.changed = False
        self.deadline = None
        self.tmpdir = None
        self.ctx = None

    def fail(self, msg, tail=None, **extra):
        extra.setdefault("actions", self.actions)
        raise JobError(msg, tail=tail, **extra)

    def cmd(self, cmd, what, check_rc=True):
        rc, out, err = self.system.run(cmd, APT_ENV)
        if rc != 0 and check_rc:
            tail = output_tail(out, err)
            self.fail("%s failed (exit %s): %s" % (what, rc, tail), tail=tail, cmd=cmd)
        return rc, out, err

    # ---------------------------------------------------------------- the job's shape

    def plan(self):
        """Validate the input, probe the host, list the actions; raises JobError before any change."""
        params = self.params
        distro = params["distro"] or default_distro()
        arch = params["arch"] or default_arch(self)
        try:
            version, distro, arch = cl.validate_target(params["version"], distro, arch)
            checksum = cl.parse_checksum(params["checksum"])
        except CusparseltError as exc:
            raise JobError(str(exc), distro=distro, arch=arch)
        if not params["packages"]:
            raise JobError("packages is empty: list at least one package (or runtime/dev)")
        major, major_source = detect_cuda_major(self)
        self.ctx = ctx = {
            "version": version, "distro": distro, "arch": arch, "cuda_major": major, "checksum": checksum,
            "url": cl.deb_url(params["base_url"], version, distro, arch), "cuda_major_source": major_source,
        }
        if params["state"] == "present":
            return plan_present(self, ctx)
        return plan_absent(self, ctx)

    def apply(self, plan):
        if self.params["state"] == "present":
            return apply_present(self, self.ctx, plan.state)
        return apply_absent(self, self.ctx, plan.state)

    def run(self, diff=False):
        """The module's result; the .deb fetched into a temporary directory is removed at the end."""
        try:
            return Job.run(self, diff)
        finally:
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
                self.tmpdir = None

    def report(self, plan, diff):
        return self.finish(plan.result, diff)

    def applied(self, result, plan, diff):
        return self.finish(result, diff)

    def finish(self, res, diff):
        ctx = self.ctx
        res = dict(res)
        res.update({
            "changed": self.changed, "actions": self.actions, "cuda_major": ctx["cuda_major"],
            "cuda_major_source": ctx["cuda_major_source"], "url": ctx["url"], "distro": ctx["distro"],
            "arch": ctx["arch"],
        })
        if diff and "diff" in ctx:
            res["diff"] = ctx["diff"]
        return res

    # ---------------------------------------------------------------- locks

    def wait_for_locks(self, extra=()):
        """Wait (bounded by lock_timeout) until nobody holds the dpkg/apt locks."""
        if self.deadline is None:
            self.deadline = time.time() + self.params["lock_timeout"]
        paths = list(cl.DPKG_LOCKS) + list(extra)
        while True:
            held = cl.dpkg_lock_holders(paths)
            if not held:
                return
            if time.time() >= self.deadline:
                holders = []
                for path, pid in sorted(held.items()):
                    holders.append("%s by pid %s (%s)" % (path, pid or "?", _cmdline(pid)))
                self.fail(
                    "the dpkg/apt lock is still held after waiting %ss: %s. Another apt or dpkg run is busy; "
                    "wait for it to finish (or stop it if it hangs) and run again, or raise lock_timeout"
                    % (self.params["lock_timeout"], "; ".join(holders)),
                    lock_holders=dict((k, v) for k, v in held.items()),
                )
            time.sleep(1)

    def remaining(self):
        return max(1, int(self.deadline - time.time())) if self.deadline else self.params["lock_timeout"]

    def dpkg(self, args, what):
        """dpkg with the lock wait; retries while another process grabs the lock first."""
        while True:
            self.wait_for_locks()
            rc, out, err = self.cmd(["dpkg"] + args, what, check_rc=False)
            if rc == 0:
                return out
            if "lock" in (err + out) and time.time() < self.deadline:
                time.sleep(1)
                continue
            tail = output_tail(out, err)
            self.fail("%s failed (exit %s): %s" % (what, rc, tail), tail=tail)

    def apt_get(self, args, what):
        self.wait_for_locks(extra=[LISTS_LOCK])
        cmd = ["apt-get", "-q", "-y", "-o", "DPkg::Lock::Timeout=%d" % self.remaining()] + args
        return self.cmd(cmd, what)


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip() or "unknown command"
    except (IOError, OSError):
        return "command unknown"


def _read(path):
    with open(path) as handle:
        return handle.read()


def _same_file(left, right):
    if not (os.path.isfile(left) and os.path.isfile(right)):
        return False
    return sha256_file(left) == sha256_file(right)


# -------------------------------------------------------------------- probing


def installed_versions(runner, names):
    names = sorted(set(names))
    if not names:
        return {}
    rc, out, _err = runner.system.run(
        ["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"] + names, APT_ENV)
    return cl.parse_dpkg_query(out)


def package_files(runner, names):
    files = []
    for name in names:
        rc, out, _err = runner.system.run(["dpkg-query", "-L", name], APT_ENV)
        if rc == 0:
            files.extend(line.strip() for line in out.splitlines() if line.strip())
    return files


def source_files(uri):
    """Source files under sources.list.d (and sources.list) with an enabled entry for ``uri``."""
    found = []
    candidates = ["/etc/apt/sources.list"]
    if os.path.isdir(cl.SOURCES_DIR):
        candidates += [os.path.join(cl.SOURCES_DIR, n) for n in sorted(os.listdir(cl.SOURCES_DIR))
                       if n.endswith(".list") or n.endswith(".sources")]
    for path in candidates:
        if os.path.isfile(path):
            try:
                text = _read(path)
            except (IOError, OSError):
                continue
            if cl.references(text, cl.source_format(path), uri):
                found.append(path)
    return found


def ldconfig_output(runner):
    rc, out, _err = runner.system.run(["ldconfig", "-p"])
    return out if rc == 0 else ""


def detect_cuda_major(runner):
    params = runner.params
    if params["cuda_major"] is not None:
        return params["cuda_major"], "option"
    nvcc = params["nvcc"] or runner.system.which("nvcc", ["/usr/local/cuda/bin"])
    if nvcc and os.path.exists(nvcc):
        rc, out, _err = runner.system.run([nvcc, "--version"])
        major = cl.parse_nvcc_version(out) if rc == 0 else None
        if major:
            return major, "nvcc"
    return params["fallback_cuda_major"], "fallback"


def default_distro():
    try:
        return cl.distro_from_os_release(_read("/etc/os-release"))
    except (IOError, OSError):
        return None


def default_arch(runner):
    rc, out, _err = runner.system.run(["dpkg", "--print-architecture"])
    if rc == 0 and out.strip():
        return out.strip()
    return os.uname()[4]


# -------------------------------------------------------------------- the .deb


def download(runner, url, dest, expected):
    """Download ``url`` to ``dest``; verify ``expected`` sha256 (fail on mismatch, leaving no file)."""
    tmp = dest + ".part"
    if url.startswith("file://"):
        # A local mirror or an offline bundle's copy: read it directly (fetch_url gives no status for file:).
        local = url[len("file://"):]
        if not os.path.isfile(local):
            runner.fail("could not read the cuSPARSELt local repo package: %s does not exist. Check version, distro, "
                        "arch and base_url" % local, url=url, status=None)
        shutil.copyfile(local, tmp)
        verify(runner, tmp, expected, url)
        os.rename(tmp, dest)
        return
    response, info = runner.system.fetch(url, runner.params["timeout"])
    if response is None or info.get("status") != 200:
        status = info.get("status")
        detail = info.get("msg", "")
        if status == 404:
            reason = "HTTP 404 Not Found: no such version/distro/arch there"
        elif status and status > 0:
            reason = "HTTP %s %s" % (status, detail)
        else:
            reason = "server unreachable (%s)" % detail
        runner.fail("could not download the cuSPARSELt local repo package from %s: %s. Check version, distro, "
                    "arch and base_url (or the proxy settings)" % (url, reason), url=url, status=status)
    try:
        with open(tmp, "wb") as handle:
            shutil.copyfileobj(response, handle, 1024 * 1024)
    except Exception as exc:  # network drop mid-transfer
        if os.path.exists(tmp):
            os.unlink(tmp)
        runner.fail("download of %s broke off: %s" % (url, exc), url=url)
    verify(runner, tmp, expected, url)
    os.rename(tmp, dest)


def verify(runner, path, expected, url):
    if not expected:
        return
    actual = sha256_file(path)
    if actual != expected:
        os.unlink(path)
        runner.fail("checksum mismatch for %s: expected sha256:%s, got sha256:%s. The file was deleted and nothing "
                    "was installed; fix the checksum (or the mirror)" % (url, expected, actual),
                    url=url, expected_checksum="sha256:" + expected, actual_checksum="sha256:" + actual)


def inspect_deb(runner, deb, version, distro, arch):
    """Check the .deb is the wanted local repo; return (its packages index stanzas, its keyring's basename)."""
    rc, out, err = runner.system.run(["dpkg-deb", "-f", deb, "Package", "Version", "Architecture"])
    if rc != 0:
        runner.fail("%s is not a Debian package: %s" % (deb, err.strip()), tail=output_tail(out, err))
    fields = dict((s.split(":", 1)[0].strip(), s.split(":", 1)[1].strip()) for s in out.splitlines() if ":" in s)
    want = cl.repo_package(version, distro)
    if fields.get("Package") != want or cl.upstream_version(fields.get("Version", "")) != version:
        runner.fail("%s holds %s %s, not %s %s; the server or mirror serves the wrong file"
                    % (deb, fields.get("Package"), fields.get("Version"), want, version))
    if fields.get("Architecture") not in (arch, "all"):
        runner.fail("%s is for architecture %s, the host needs %s" % (deb, fields.get("Architecture"), arch))
    scratch = tempfile.mkdtemp(prefix="cusparselt-inspect-")
    try:
        rc, _out, err = runner.system.run(["dpkg-deb", "-x", deb, scratch])
        if rc != 0:
            runner.fail("could not unpack %s: %s" % (deb, err.strip()), tail=output_tail(_out, err))
        inner = os.path.join(scratch, cl.repo_dir(version, distro).lstrip("/"))
        if not os.path.isdir(inner):
            runner.fail("%s does not contain %s; it is not a cuSPARSELt local repo package"
                        % (deb, cl.repo_dir(version, distro)))
        try:
            stanzas = cl.read_packages_index(inner)
        except CusparseltError as exc:
            runner.fail(str(exc))
        keyring = cl.find_keyring(inner)
        return stanzas, os.path.basename(keyring) if keyring else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -------------------------------------------------------------------- present


def describe(packages, files):
    lines = ["package %s %s" % (n, v) for n, v in sorted(packages.items()) if v]
    lines += ["file %s" % f for f in sorted(files)]
    return "\n".join(lines) + ("\n" if lines else "")


def plan_present(runner, ctx):
    """The probe of state=present: the actions and the check-mode result; fetches and checks the
    .deb when the repo is missing (into a temporary directory unless download_dir is kept)."""
    params = runner.params
    version, distro, arch, major = ctx["version"], ctx["distro"], ctx["arch"], ctx["cuda_major"]
    rdir = cl.repo_dir(version, distro)
    uri = cl.repo_uri(version, distro)
    repo_pkg = cl.repo_package(version, distro)
    ldconf = cl.ldconf_file_for(version, distro, major)

    # ---- probe: what is there now
    installed = installed_versions(runner, [repo_pkg] + cl.candidate_packages(major, params["packages"]))
    repo_ok = repo_pkg in installed and cl.upstream_version(installed[repo_pkg]) == version and os.path.isdir(rdir)
    stanzas = None
    keyring_name = None
    if repo_ok:
        try:
            stanzas = cl.read_packages_index(rdir)
        except CusparseltError:
            repo_ok = False
        src_key = cl.find_keyring(rdir)
        keyring_name = os.path.basename(src_key) if src_key else None

    deb = None
    downloaded = False
    if not repo_ok:
        runner.actions.append("install %s %s-1 (%s)" % (
            repo_pkg, version, "not installed" if repo_pkg not in installed else
            "installed at %s" % installed[repo_pkg]))
        deb_name = cl.deb_filename(version, distro, arch)
        if params["download_dir"]:
            if not os.path.isdir(params["download_dir"]):
                if runner.check_mode:
                    runner.tmpdir = tempfile.mkdtemp(prefix="cusparselt-")
                else:
                    os.makedirs(params["download_dir"], 0o755)
            target_dir = runner.tmpdir or params["download_dir"]
        else:
            runner.tmpdir = tempfile.mkdtemp(prefix="cusparselt-")
            target_dir = runner.tmpdir
        deb = os.path.join(target_dir, deb_name)
        cached = os.path.join(params["download_dir"], deb_name) if params["download_dir"] else None
        # A kept .deb is reused only when its pinned sha256 proves it; without a pin it is fetched
        # again (over TLS: preflight refuses an unpinned installer by any other way).
        if cached and os.path.isfile(cached) and ctx["checksum"] and sha256_file(cached) == ctx["checksum"]:
            deb = cached
        else:
            if not ctx["checksum"]:
                runner.system.warn("no checksum given for %s: the download is only checked for its package "
                                   "name and version" % ctx["url"])
            download(runner, ctx["url"], deb, ctx["checksum"])
            downloaded = True
        stanzas, keyring_name = inspect_deb(runner, deb, version, distro, arch)
        if not keyring_name:
            runner.fail("%s holds no cusparselt-*keyring.gpg in %s; apt could not verify the repository"
                        % (ctx["url"], rdir))

    available = cl.index_versions(stanzas, arch)
    try:
        names, flavour = cl.select_packages(available, major, params["packages"])
    except CusparseltError as exc:
        runner.fail(str(exc), available=sorted(available))
    ctx["flavour"] = flavour

    keyring_dst = os.path.join(cl.KEYRING_DIR, keyring_name) if keyring_name else None
    if repo_ok and not keyring_name:
        runner.fail("%s holds no cusparselt-*keyring.gpg; reinstall the local repo (state=absent, then present)" % rdir)
    if not (keyring_dst and os.path.isfile(keyring_dst) and (not repo_ok or _same_file(
            os.path.join(rdir, keyring_name), keyring_dst))):
        runner.actions.append("copy keyring %s to %s" % (keyring_name, cl.KEYRING_DIR))

    srcs = source_files(uri) if repo_ok else []
    bad_srcs = [p for p in srcs if not cl.signed_by_ok(_read(p), cl.source_format(p), uri, keyring_dst)]
    if repo_ok and not srcs:
        runner.actions.append("write apt source %s signed-by %s" % (cl.source_file_for(version, distro), keyring_dst))
    for path in bad_srcs:
        runner.actions.append("make %s use signed-by=%s" % (path, keyring_dst))
    if not repo_ok:
        runner.actions.append("make the repo's apt source use signed-by=%s" % keyring_dst)

    wanted = dict((n, available[n]) for n in names)
    missing = [n for n in names if installed.get(n) != wanted[n]]
    needs_update = bool(missing or not repo_ok or bad_srcs or not srcs)
    if needs_update:
        runner.actions.append("apt-get update for %s only" % uri)
    if missing:
        runner.actions.append("install %s" % ", ".join("%s=%s" % (n, wanted[n]) for n in missing))

    paths = cl.pick_paths(package_files(runner, names), major) if not missing else {}
    lib_dir = os.path.dirname(paths["library"]) if paths.get("library") else None
    ld_ok = bool(lib_dir) and cl.ldconfig_has(ldconfig_output(runner), lib_dir)
    if not ld_ok:
        runner.actions.append("refresh the linker cache (ldconfig)")

    if not runner.actions:
        return Plan([], result_for(ctx, rdir, keyring_dst, srcs[0] if srcs else None, names, installed, paths,
                                   False))

    runner.changed = True
    before = describe(dict((n, installed.get(n)) for n in [repo_pkg] + names), [
        p for p in [keyring_dst, rdir, ldconf] + srcs if p and os.path.exists(p)])
    after_pkgs = dict((n, wanted[n]) for n in names)
    after_pkgs[repo_pkg] = "%s-1" % version
    after_files = set([keyring_dst, rdir] + (srcs or [cl.source_file_for(version, distro)]))
    ctx["diff"] = {"before": before, "after": describe(after_pkgs, after_files)}
    res = result_for(ctx, rdir, keyring_dst, srcs[0] if srcs else None, names, installed, {}, downloaded)
    for item in res["packages"]:
        item["version"] = installed.get(item["name"]) if item["name"] not in missing else None
    state = {"repo_ok": repo_ok, "deb": deb, "keyring_name": keyring_name, "keyring_dst": keyring_dst,
             "needs_update": needs_update, "missing": missing, "wanted": wanted, "names": names,
             "before": before, "downloaded": downloaded}
    return Plan(runner.actions, res, state)


def apply_present(runner, ctx, state):
    """state=present's changes, in order: the repo .deb, keyring, sources, apt-get, ldconfig."""
    version, distro, major = ctx["version"], ctx["distro"], ctx["cuda_major"]
    rdir = cl.repo_dir(version, distro)
    uri = cl.repo_uri(version, distro)
    repo_pkg = cl.repo_package(version, distro)
    ldconf = cl.ldconf_file_for(version, distro, major)
    repo_ok, deb, keyring_name, keyring_dst = state["repo_ok"], state["deb"], state["keyring_name"], state["keyring_dst"]
    needs_update, missing, wanted, names = state["needs_update"], state["missing"], state["wanted"], state["names"]
    before, downloaded = state["before"], state["downloaded"]
    if not repo_ok:
        runner.dpkg(["-i", deb], "dpkg -i %s" % os.path.basename(deb))
    src_key = os.path.join(rdir, keyring_name)
    if not _same_file(src_key, keyring_dst):
        shutil.copyfile(src_key, keyring_dst)
        os.chmod(keyring_dst, 0o644)
    srcs = source_files(uri)
    if not srcs:
        path = cl.source_file_for(version, distro)
        atomic_write_text(path, cl.one_line_source(uri, keyring_dst))
        srcs = [path]
    for path in srcs:
        fmt = cl.source_format(path)
        text, changed = cl.ensure_signed_by(_read(path), fmt, uri, keyring_dst)
        if changed:
            atomic_write_text(path, text)
    if needs_update:
        for path in srcs:
            runner.apt_get(["-o", "Dir::Etc::sourcelist=%s" % path, "-o", "Dir::Etc::sourceparts=-",
                            "-o", "APT::Get::List-Cleanup=0", "update"], "apt-get update of %s" % path)
    if missing:
        runner.apt_get(["install", "--no-install-recommends"] + ["%s=%s" % (n, wanted[n]) for n in missing],
                       "apt-get install of %s" % ", ".join(missing))
    installed = installed_versions(runner, [repo_pkg] + names)
    paths = cl.pick_paths(package_files(runner, names), major)
    lib_dir = os.path.dirname(paths["library"]) if paths.get("library") else None
    runner.cmd(["ldconfig"], "ldconfig")
    if lib_dir and not cl.ldconfig_has(ldconfig_output(runner), lib_dir):
        atomic_write_text(ldconf, lib_dir + "\n")
        runner.actions.append("add %s to the linker path in %s" % (lib_dir, ldconf))
        runner.cmd(["ldconfig"], "ldconfig")
    after_files = [p for p in [keyring_dst, rdir, ldconf] + srcs if p and os.path.exists(p)]
    after_pkgs = dict((n, installed.get(n)) for n in [repo_pkg] + names)
    ctx["diff"] = {"before": before, "after": describe(after_pkgs, after_files)}
    return result_for(ctx, rdir, keyring_dst, srcs[0], names, installed, paths, downloaded)


def result_for(ctx, rdir, keyring, source, names, installed, paths, downloaded):
    return {
        "repo_dir": rdir,
        "keyring": keyring,
        "source_file": source,
        "packages": [{"name": n, "version": installed.get(n)} for n in names],
        "include_dir": paths.get("include_dir"),
        "library": paths.get("library"),
        "root_dir": paths.get("root_dir"),
        "downloaded": downloaded,
    }


# -------------------------------------------------------------------- absent


def plan_absent(runner, ctx):
    """The probe of state=absent: what of this release is on the host, to purge and remove."""
    params = runner.params
    version, distro, major = ctx["version"], ctx["distro"], ctx["cuda_major"]
    rdir = cl.repo_dir(version, distro)
    uri = cl.repo_uri(version, distro)
    repo_pkg = cl.repo_package(version, distro)
    ldconf = cl.ldconf_file_for(version, distro, major)

    repo_names = []
    keyring_name = None
    if os.path.isdir(rdir):
        try:
            repo_names = list(cl.index_versions(cl.read_packages_index(rdir)))
        except CusparseltError:
            repo_names = []
        src_key = cl.find_keyring(rdir)
        keyring_name = os.path.basename(src_key) if src_key else None
    srcs = source_files(uri)
    if not keyring_name:
        for path in srcs:
            for entry_uri, signed, _enabled in cl.source_entries(_read(path), cl.source_format(path)):
                if signed and entry_uri.rstrip("/") == uri and os.path.dirname(signed) == cl.KEYRING_DIR:
                    keyring_name = os.path.basename(signed)
    keyring_dst = os.path.join(cl.KEYRING_DIR, keyring_name) if keyring_name else None
    kept_keyring = keyring_dst and keyring_in_use_elsewhere(keyring_dst, srcs)
    if kept_keyring:
        keyring_dst = None

    # Only packages of this release: named in its index (or, with the repo dir gone, the names the module
    # installs) and at a version of this release, so another cuSPARSELt release on the host stays intact.
    names = repo_names or cl.candidate_packages(major, params["packages"])
    installed = installed_versions(runner, [repo_pkg] + names)
    pkgs = sorted(n for n, v in installed.items() if n != repo_pkg and cl.same_release(v, version))
    lists = _glob(cl.apt_lists_glob(version, distro))
    files = [p for p in [keyring_dst, rdir, ldconf] + srcs + lists if p and os.path.lexists(p)]
    cached = os.path.join(params["download_dir"], cl.deb_filename(version, distro, ctx["arch"])) \
        if params["download_dir"] else None
    if cached and os.path.exists(cached):
        files.append(cached)
    if kept_keyring:
        runner.actions.append("keep %s: other apt sources still use it" % kept_keyring)
    if pkgs:
        runner.actions.append("purge %s" % ", ".join(pkgs))
    if repo_pkg in installed:
        runner.actions.append("purge %s" % repo_pkg)
    for path in files:
        runner.actions.append("remove %s" % path)
    res = {"repo_dir": rdir, "keyring": keyring_dst, "source_file": srcs[0] if srcs else None,
           "packages": [{"name": n, "version": None} for n in pkgs], "include_dir": None, "library": None,
           "root_dir": None, "downloaded": False}
    if not [a for a in runner.actions if not a.startswith("keep ")]:
        runner.actions = []
        return Plan([], res)
    runner.changed = True
    ctx["diff"] = {"before": describe(dict((n, installed[n]) for n in installed), files), "after": ""}
    return Plan(runner.actions, res, {"pkgs": pkgs, "installed": installed, "files": files, "result": res})


def apply_absent(runner, ctx, state):
    """state=absent's changes: purge this release's packages and repo, remove its files."""
    pkgs, installed, files, res = state["pkgs"], state["installed"], state["files"], state["result"]
    repo_pkg = cl.repo_package(ctx["version"], ctx["distro"])
    if pkgs:
        runner.apt_get(["purge"] + pkgs, "apt-get purge of %s" % ", ".join(pkgs))
    if repo_pkg in installed:
        runner.dpkg(["--purge", repo_pkg], "dpkg --purge %s" % repo_pkg)
    for path in files:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.unlink(path)
    runner.cmd(["ldconfig"], "ldconfig")
    return res


def keyring_in_use_elsewhere(keyring, own_sources):
    """The keyring path when an apt source other than ``own_sources`` is signed by it, else None."""
    candidates = ["/etc/apt/sources.list"]
    if os.path.isdir(cl.SOURCES_DIR):
        candidates += [os.path.join(cl.SOURCES_DIR, n) for n in sorted(os.listdir(cl.SOURCES_DIR))
                       if n.endswith(".list") or n.endswith(".sources")]
    for path in candidates:
        if path in own_sources or not os.path.isfile(path):
            continue
        try:
            entries = cl.source_entries(_read(path), cl.source_format(path))
        except (IOError, OSError):
            continue
        if any(signed == keyring for _uri, signed, _enabled in entries):
            return keyring
    return None


def _glob(pattern):
    return sorted(glob.glob(pattern))
