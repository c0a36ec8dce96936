"""Role cuda_libs for real on a podman container, against the stand-in NVIDIA server.

Converge twice, verify and cleanup (cuSPARSELt state=absent leaves no trace) are molecule's `cuda`
scenario, on the test bed's amd64 and arm64 hosts (the same playbooks ran here on amd64 too, until the
test bed made that a second copy). Here: a host that already has NVIDIA's repository (DGX OS), and then,
on the same container, that host offline with its CUDA source removed (the libraries stay installed).
"""

import os
import re
import socket
import subprocess
import sys

import pytest

from helpers import CONNECTION

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "nvidia_repo"))
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


@pytest.fixture(scope="module")
def dgx_host(tmp_path_factory):
    """A fresh amd64 container that, like DGX OS, already has NVIDIA's CUDA source and key (pointing at the
    stand-in server), converged with molecule cuda's playbook: (container, inventory path)."""
    reason = podman_host.image_missing("amd64")
    if reason:
        pytest.skip(reason)
    import build_repo
    cache = build_repo.build()
    deb = os.path.join(cache, "tree/compute/cuda/repos/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb")
    tmp_path = tmp_path_factory.mktemp("dgx")
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
        inventory.write_text("all:\n  hosts:\n    cuda-amd64:\n      ansible_connection: %s\n"
                             "      ansible_host: %s\n      ansible_python_interpreter: /usr/bin/python3\n" % (CONNECTION, box.name))
        playbook("converge.yml", str(inventory), port)
        yield box, str(inventory)
    finally:
        box.stop()
        subprocess.run([sys.executable, os.path.join(podman_host.FIXTURE, "serve.py"), os.path.join(cache, "tree"),
                        "--stop", "--pidfile", os.path.join(cache, "server-%d.pid" % port)])


def test_cuda_libs_keeps_a_repository_the_host_already_has(dgx_host):
    """DGX OS ships the CUDA source and key: the role must use them, not install cuda-keyring over them."""
    box, _inventory = dgx_host
    state = box.sh("dpkg-query -W -f '${db:Status-Abbrev}' cuda-keyring 2>/dev/null; "
                   "ls /etc/apt/sources.list.d/; dpkg-query -W -f '${Version}' libcublas-13-0", check=False).stdout
    assert not state.startswith("ii"), state
    assert "cuda-ubuntu2404-x86_64.list" not in state and "dgx-cuda.list" in state
    assert state.rstrip().endswith("13.0.2.14-1")


def test_cuda_libs_offline_with_the_libraries_there_changes_nothing(dgx_host, tmp_path):
    """Issue 13's "already satisfied": the libraries are installed (dpkg, at the pinned versions), but the host's
    CUDA apt source is gone and the repository URL it is given answers nothing. cuda_libs exits 0 with changed=0
    and the host's packages, apt sources and lists, keyrings, /var (no /var/cache/sparkforge download
    directory) and linker cache are what they were."""
    box, inventory = dgx_host
    box.sh("rm -f /etc/apt/sources.list.d/dgx-cuda.list")
    dead = free_port()  # nothing listens there
    play = tmp_path / "offline.yml"
    play.write_text(
        "- hosts: cuda-amd64\n  vars:\n    cuda_libs_repo_url: http://127.0.0.1:%d/compute/cuda/repos\n"
        "    cuda_libs_distro: ubuntu2404\n    cuda_libs_install_build_prereqs: false\n"
        "  roles: [sparkforge.stack.cuda_libs]\n" % dead)
    before = box.snapshot()
    recap, out = playbook(str(play), inventory, dead)
    assert recap == {"cuda-amd64": 0}, out[-6000:]
    after = box.snapshot()
    assert after == before, [line for line in after.splitlines() if line not in before.splitlines()][:20]
    state = box.sh("ls /etc/apt/sources.list.d/; test -e /var/cache/sparkforge && echo CACHE-DIR || true").stdout
    assert "cuda-" not in state and "CACHE-DIR" not in state, state
