"""The shared container test bed: three GPU-less stand-ins of the platforms sparkforge provisions,
started once per test run and used by the pytest journey and every molecule scenario.

    hopper-amd64    x86_64, a fake H100 (every molecule scenario)
    spark-arm64     aarch64 under qemu-user, a fake GB10 (DGX Spark; molecule cuda, default, fleet)
    offline-amd64   x86_64 with no network at all (``--network none``), a fake GB10 (pytest's journey:
                    the check-mode matrix, converge and reruns)

Ansible reaches them through CONNECTION, the pipelined podman connection in tests/plugins/connection/.

What each host's fake ``nvidia-smi`` reports is read from molecule/shared/inventory/host_vars/<host>.yml
(tests/fixtures/testbed/host_vars/ for offline-amd64, which no scenario's inventory holds) (``fake_gpus``), the one place the test bed's GPUs are written down.  A host is started from the
image built by molecule/shared/build-images.sh, made a GPU stand-in with ``podman cp`` (no emulated
command runs for that), and committed as ``localhost/sparkforge-testbed:<host>``: the host's fresh
state.  ``restore(host)`` replaces a host by a new container of that snapshot in about a second, so a
stage that needs a fresh host never converges again from nothing.

Every host mounts ``SHARE`` at the same path, so a ``file://`` URL the controller writes there holds on
the hosts too.  Hosts are labelled with a hash of their recipe; a leftover from another recipe (or a
killed run) is replaced, a current one is reused.

    python -m tests.testbed up [HOST...]     start the hosts fresh from their snapshots; all four by default
    python -m tests.testbed down             remove the hosts and their snapshots
    python -m tests.testbed status
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_VARS = os.path.join(REPO, "molecule", "shared", "inventory", "host_vars")
# The hosts no molecule scenario runs on keep theirs out of molecule's shared inventory: preflight refuses a
# host_vars file naming no host of the inventory (offline-amd64 is pytest's journey's alone).
TESTBED_HOST_VARS = os.path.join(REPO, "tests", "fixtures", "testbed", "host_vars")
SMI = os.path.join(REPO, "molecule", "shared", "files", "fake-nvidia-smi")
SHARE = os.environ.get("SPARKFORGE_TESTBED_SHARE", "/tmp/sparkforge-testbed")
CA = "/etc/ssl/certs/ca-certificates.crt"
# How Ansible reaches a host: the podman connection, pipelined (tests/plugins/connection/testbed_podman.py).
CONNECTION = "testbed_podman"
CONNECTION_PLUGINS = os.path.join(REPO, "tests", "plugins", "connection")

# name: (arch, network)
HOSTS = {
    "hopper-amd64": ("amd64", "host"),
    "spark-arm64": ("arm64", "host"),
    "offline-amd64": ("amd64", "none"),
}
# runc (crun fails on this machine's cgroup setup) and the most the sandbox's ulimits allow.
RUN_OPTS = ["--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1000:1000"]


def image(arch):
    return "localhost/sparkforge-bookworm:%s" % arch


def snapshot_image(name):
    return "localhost/sparkforge-testbed:%s" % name


def fake_gpus(name):
    path = os.path.join(HOST_VARS, name + ".yml")
    if not os.path.exists(path):
        path = os.path.join(TESTBED_HOST_VARS, name + ".yml")
    with open(path) as handle:
        return yaml.safe_load(handle)["fake_gpus"]


def _podman(*args, check=True, timeout=600):
    proc = subprocess.run(["podman"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError("podman %s failed (%s): %s" % (" ".join(args), proc.returncode, proc.stderr.strip()))
    return proc


def _image_id(ref):
    proc = _podman("image", "inspect", "--format", "{{.Id}}", ref, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def recipe(name):
    """What a host is made of: its base image's id, its options, its GPUs and the fake nvidia-smi."""
    arch, network = HOSTS[name]
    with open(SMI, "rb") as handle:
        smi = hashlib.sha256(handle.read()).hexdigest()
    text = json.dumps([_image_id(image(arch)), arch, network, SHARE, RUN_OPTS, fake_gpus(name), smi], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _label(ref, kind="container"):
    proc = _podman(kind, "inspect", "--format", '{{ index .Config.Labels "sparkforge.testbed" }}', ref, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _running(name):
    proc = _podman("container", "inspect", "--format", "{{.State.Running}}", name, check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def _run(name, from_image, want):
    arch, network = HOSTS[name]
    _podman("rm", "-f", "-t", "0", "--ignore", name)
    os.makedirs(SHARE, exist_ok=True)
    _podman("run", "-d", "--name", name, "--hostname", name, "--arch", arch, "--network", network,
            "--label", "sparkforge.testbed=%s" % want, *RUN_OPTS,
            "-v", "%s:/etc/ssl/certs/host-ca.crt:ro" % CA, "-v", "%s:%s" % (SHARE, SHARE),
            from_image, "sleep", "infinity")


def _make_stand_in(name):
    """The fake nvidia-smi and its GPU profile, copied in (podman cp runs nothing inside the host)."""
    staging = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(staging, "sparkforge"))
        with open(os.path.join(staging, "sparkforge", "fake-gpus.json"), "w") as handle:
            # The same bytes molecule/shared/prepare.yml writes (to_nice_json), so that playbook finds nothing to do.
            handle.write(json.dumps({"gpus": fake_gpus(name), "cuda_version": "13.0"}, indent=4, sort_keys=True))
        os.chmod(os.path.join(staging, "sparkforge", "fake-gpus.json"), 0o644)
        os.chmod(os.path.join(staging, "sparkforge"), 0o755)
        _podman("cp", os.path.join(staging, "sparkforge"), "%s:/etc/" % name)
        _podman("cp", SMI, "%s:/usr/bin/nvidia-smi" % name)
    finally:
        shutil.rmtree(staging)


def up(names=None, log=print, fresh=False):
    """Start (or reuse) the named hosts; returns the names of those started anew. ``fresh``: a running
    host is replaced from its snapshot too (a test run starts from hosts nothing has touched)."""
    started = []
    for name in names or list(HOSTS):
        arch, _network = HOSTS[name]
        if _image_id(image(arch)) is None:
            raise RuntimeError("image %s is missing: run molecule/shared/build-images.sh %s" % (image(arch), arch))
        want = recipe(name)
        if _label(name) == want and _running(name) and not fresh:
            continue
        if _label(snapshot_image(name), "image") != want:
            _run(name, image(arch), want)
            _make_stand_in(name)
            _podman("commit", "-q", "--change", "LABEL sparkforge.testbed=%s" % want, name, snapshot_image(name))
            log("testbed: %s made from %s and snapshotted as %s" % (name, image(arch), snapshot_image(name)))
        else:
            _run(name, snapshot_image(name), want)
            log("testbed: %s started from its snapshot" % name)
        started.append(name)
    return started


def restore(name):
    """Replace ``name`` by a fresh container of its snapshot: the state ``up`` made, nothing since."""
    want = recipe(name)
    if _label(snapshot_image(name), "image") != want:
        up([name], log=lambda _msg: None)
        want = recipe(name)
    _run(name, snapshot_image(name), want)


def down(log=print):
    for name in HOSTS:
        _podman("rm", "-f", "-t", "0", "--ignore", name)
        _podman("rmi", "-f", snapshot_image(name), check=False)
    log("testbed: removed %s" % ", ".join(HOSTS))


def exec_(name, script, timeout=600):
    """Run ``script`` with bash on host ``name``; returns the CompletedProcess (stdout and stderr together)."""
    return subprocess.run(["podman", "exec", name, "bash", "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)


def fs_snapshot(name, skip=()):
    """Every file (with size and mtime) and directory on host ``name`` outside the kernel's and the connection's
    scratch space (a directory's mtime changes when the connection makes its own ~/.ansible in it)."""
    # /root/.ansible_async holds Ansible's own records of its async tasks (a check-mode run starts them too).
    prune = ["/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/root/.ansible", "/root/.ansible_async", "/run",
             SHARE] + list(skip)
    expr = " -o ".join("-path %s" % p for p in prune)
    proc = exec_(name, "find / -xdev \\( %s \\) -prune -o -type d -printf '%%p/\\n' "
                       "-o -printf '%%p %%s %%T@\\n' | sort" % expr)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-2000:])
    return proc.stdout


def inventory_host(name, **extra):
    """An inventory entry reaching host ``name`` through the podman connection."""
    entry = {"ansible_connection": CONNECTION, "ansible_host": name,
             "ansible_python_interpreter": "/usr/bin/python3"}
    entry.update(extra)
    return entry


def main(argv):
    if not argv or argv[0] not in ("up", "down", "status"):
        print(__doc__.strip().splitlines()[-3:] and "usage: python -m tests.testbed up [HOST...] | down | status",
              file=sys.stderr)
        return 2
    if argv[0] == "up":
        unknown = [n for n in argv[1:] if n not in HOSTS]
        if unknown:
            print("unknown test bed host(s): %s (known: %s)" % (", ".join(unknown), ", ".join(HOSTS)), file=sys.stderr)
            return 2
        up(argv[1:] or None, fresh=True)
        for name in argv[1:] or HOSTS:
            print("testbed: %s up (%s, network %s)" % ((name,) + HOSTS[name]))
    elif argv[0] == "down":
        down()
    else:
        for name in HOSTS:
            print("%-14s running=%s current=%s" % (name, _running(name), _label(name) == recipe(name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
