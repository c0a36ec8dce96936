"""Roles cuda_libs + cusparselt for real: the molecule/cuda playbooks on podman containers.

The same converge/verify/cleanup playbooks as the molecule scenario, run with
ansible-playbook over the containers.podman connection on fresh containers (amd64, and
arm64 through qemu when its image is there), against the stand-in NVIDIA server.
Converge twice (the second run must change nothing), verify, then cleanup
(cuSPARSELt state=absent must leave no trace).
"""

import os
import re
import socket
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nvidia_repo"))
import podman_host  # noqa: E402

REPO = podman_host.REPO
SCENARIO = os.path.join(REPO, "molecule", "cuda")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def playbook(name, inventory, port):
    env = dict(os.environ, SPARKFORGE_NVIDIA_REPO_PORT=str(port), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
                           os.path.join(SCENARIO, name)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-6000:]
    recap = dict((host, int(changed)) for host, changed in
                 re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M))
    return recap, proc.stdout


def test_roles_converge_idempotent_verify_and_absent(tmp_path):
    arches = ["amd64"]
    if os.environ.get("SPARKFORGE_TEST_ARM64", "1") != "0" and not podman_host.image_missing("arm64"):
        arches.append("arm64")
    reason = podman_host.image_missing("amd64")
    if reason:
        pytest.skip(reason)
    boxes = [podman_host.Container(arch) for arch in arches]
    port = free_port()
    try:
        inventory = tmp_path / "hosts.yml"
        lines = ["all:", "  hosts:"]
        for box in boxes:
            lines += ["    cuda-%s:" % box.arch, "      ansible_connection: containers.podman.podman",
                      "      ansible_host: %s" % box.name, "      ansible_python_interpreter: /usr/bin/python3"]
        inventory.write_text("\n".join(lines) + "\n")
        first, _out = playbook("converge.yml", str(inventory), port)
        assert all(first["cuda-%s" % a] > 0 for a in arches), first
        second, out = playbook("converge.yml", str(inventory), port)
        assert all(second["cuda-%s" % a] == 0 for a in arches), out[-6000:]
        playbook("verify.yml", str(inventory), port)
        already_there_offline(boxes[0], str(inventory), tmp_path)
        cleaned, _out = playbook("cleanup.yml", str(inventory), port)
        assert all(cleaned["cuda-%s" % a] > 0 for a in arches), cleaned
    finally:
        for box in boxes:
            box.stop()


def already_there_offline(box, inventory, tmp_path):
    """Issue 13's "already satisfied": the libraries are installed (dpkg, pinned versions) but the host has
    no apt source for them and no route to any server. cuda_libs changes nothing: no download, no apt
    source, no directory."""
    box.sh("rm -f /etc/apt/sources.list.d/cuda-ubuntu2404-*.list && rm -rf /var/cache/sparkforge")
    dead = free_port()
    play = tmp_path / "offline.yml"
    play.write_text(
        "- hosts: %s\n  vars:\n    cuda_libs_repo_url: http://127.0.0.1:%d/compute/cuda/repos\n"
        "    cuda_libs_distro: ubuntu2404\n    cuda_libs_install_build_prereqs: false\n"
        "  roles: [sparkforge.stack.cuda_libs]\n" % ("cuda-" + box.arch, dead))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
                           str(play)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert re.search(r"^cuda-%s\s+: ok=\d+\s+changed=0\b" % box.arch, proc.stdout, re.M), proc.stdout[-3000:]
    state = box.sh("ls /etc/apt/sources.list.d/; test -e /var/cache/sparkforge && echo CACHE-DIR || true",
                   check=False).stdout
    assert "cuda-ubuntu2404" not in state and "CACHE-DIR" not in state, state


def test_cuda_libs_keeps_a_repository_the_host_already_has(tmp_path):
    """DGX OS ships the CUDA source and key: the role must use them, not install cuda-keyring over them."""
    reason = podman_host.image_missing("amd64")
    if reason:
        pytest.skip(reason)
    import build_repo
    cache = build_repo.build()
    deb = os.path.join(cache, "tree/compute/cuda/repos/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb")
    unpacked = tmp_path / "keyring"
    subprocess.run(["dpkg-deb", "-x", deb, str(unpacked)], check=True)
    box = podman_host.Container("amd64")
    port = free_port()
    try:
        key = "/usr/share/keyrings/dgx-cuda-keyring.gpg"
        subprocess.run(["podman", "cp", str(unpacked / "usr/share/keyrings/cuda-archive-keyring.gpg"),
                        "%s:%s" % (box.name, key)], check=True)
        box.sh("echo 'deb [signed-by=%s] http://127.0.0.1:%d/compute/cuda/repos/ubuntu2404/x86_64/ /' "
               "> /etc/apt/sources.list.d/dgx-cuda.list" % (key, port))
        inventory = tmp_path / "hosts.yml"
        inventory.write_text("all:\n  hosts:\n    cuda-amd64:\n      ansible_connection: containers.podman.podman\n"
                             "      ansible_host: %s\n      ansible_python_interpreter: /usr/bin/python3\n" % box.name)
        playbook("converge.yml", str(inventory), port)
        state = box.sh("dpkg-query -W -f '${db:Status-Abbrev}' cuda-keyring 2>/dev/null; "
                       "ls /etc/apt/sources.list.d/; dpkg-query -W -f '${Version}' libcublas-13-0", check=False).stdout
        assert not state.startswith("ii"), state
        assert "cuda-ubuntu2404-x86_64.list" not in state and "dgx-cuda.list" in state
        assert state.rstrip().endswith("13.0.2.14-1")
    finally:
        box.stop()
        subprocess.run([sys.executable, os.path.join(podman_host.FIXTURE, "serve.py"), os.path.join(cache, "tree"),
                        "--stop", "--pidfile", os.path.join(cache, "server-%d.pid" % port)])
