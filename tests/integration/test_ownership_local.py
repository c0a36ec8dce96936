"""Issue 52, item 1, through the entry point a user types: `ansible-playbook playbooks/spark.yml` on this machine
(connection local, a fake nvidia-smi, a temporary prefix: tests/integration/test_check_mode_local.py's stand-in
host). The host is one a user already lives on: `sparkforge_venv` names a venv they made with
`python -m venv --without-pip` (as `uv venv` makes them) holding their own package, and `runtime_env_profile_path`
names their dotfile, mode 0600, exporting a token. `--check` and the real run both refuse in preflight, before any
change, naming both paths and the variables that adopt them; a listing of the user's paths (modes, owners,
bytes) is the same after. Adopted through those variables, the run provisions the host: the venv keeps the user's
package, the dotfile is kept as <path>.sparkforge-prev with its mode, and the profile is sparkforge's."""

import os
import stat
import subprocess
import sys

import pytest

from test_check_mode_local import MINIMAL, PAIRED, TORCH, TORCH_ARCHS, add_dist, make_host, playbook, site_packages
from test_check_mode_local import template_venv  # noqa: F401
from helpers import REPO
from test_result_is_the_plan import flat, git_status, set_vars

TOKEN = "export HF_TOKEN=hf_user_secret_0123456789\n"


def listing(*tops):
    """Every path under ``tops`` (themselves included) with its mode, owner and bytes: what any change shows."""
    out = {}
    for top in tops:
        paths = [str(top)]
        for base, dirs, files in os.walk(str(top)):
            paths += [os.path.join(base, n) for n in dirs + files]
        for path in paths:
            st = os.lstat(path)
            data = None
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    data = handle.read()
            out[path] = (st.st_mode, st.st_uid, st.st_gid, data)
    return out


def users_host(tmp_path):
    """make_host's stand-in, but the venv and the profile file are the user's own."""
    host = make_host(tmp_path, None, "existing", venv=False, components=["pytorch", "runtime_env"])
    venv = host["prefix"] / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = site_packages(str(venv))
    # The torch the plan keeps (source existing), and a package of the user's.
    add_dist(site, "torch", TORCH, "+cu130", cuda="13.0", archs=TORCH_ARCHS)
    for name, version in list(PAIRED.items()) + list(MINIMAL.items()):
        add_dist(site, name, version)
    add_dist(site, "mylib", "1.0")
    profile = tmp_path / "profile.d" / "sparkforge.sh"
    profile.parent.mkdir()
    profile.write_text(TOKEN)
    os.chmod(str(profile), 0o600)
    return host, venv, profile


@pytest.mark.full
@pytest.mark.parametrize("rows", [pytest.param(("O01", "O04", "O05", "O06", "O07"), id="O01+O04+O05+O06+O07")])
def test_a_users_venv_and_dotfile_are_refused_before_any_change_then_adopted_keeping_both(tmp_path, rows):
    host, venv, profile = users_host(tmp_path)
    watched = [host["prefix"], profile.parent]
    before, status = listing(*watched), git_status()
    for extra in (["--check"], []):
        proc, _ = playbook(host, *extra)
        out = flat(proc.stdout)
        assert proc.returncode == 2, proc.stdout[-4000:]
        assert ("sparkforge_venv=%s: %s is a venv sparkforge did not make (no .sparkforge-venv-complete in it; "
                "without pip; it holds" % (venv, venv)) in out, proc.stdout[-4000:]
        assert "mylib-1.0" in out and "set sparkforge_venv_adopt: true" in out, proc.stdout[-4000:]
        assert ("runtime_env_profile_path=%s: %s is a file sparkforge did not make (its first line is not "
                "'# managed by sparkforge'; mode 0600" % (profile, profile)) in out, proc.stdout[-4000:]
        assert "set runtime_env_profile_adopt: true" in out and "nothing was changed" in out
        # Refused in preflight: no role ran, no lock was taken, and the token was never printed.
        assert "TASK [sparkforge.stack.pytorch" not in proc.stdout and "hf_user_secret" not in proc.stdout
        assert listing(*watched) == before, "a refused run changed the user's venv or dotfile"
    assert git_status() == status

    set_vars(host, sparkforge_venv_adopt=True, runtime_env_profile_adopt=True)
    proc, _ = playbook(host)
    assert proc.returncode == 0, proc.stdout[-4000:]
    out = flat(proc.stdout)
    assert "adopted (sparkforge_venv_adopt)" in out and "adopted (runtime_env_profile_adopt)" in out, out[-4000:]
    assert "hf_user_secret" not in proc.stdout, "the diff or a message showed the user's token"
    after = listing(*watched)
    # Every file of the user's venv is as it was (the run added its own files beside them).
    changed = [p for p, what in before.items() if p.startswith(str(venv) + "/") and after.get(p) != what
               and not p.endswith("/bin/activate")]
    assert changed == [], changed
    assert subprocess.run([str(venv / "bin" / "python"), "-c", "import mylib"], check=False).returncode == 0
    # The dotfile kept beside it as it was (text, mode); the profile now sparkforge's.
    prev = profile.parent / "sparkforge.sh.sparkforge-prev"
    assert prev.read_text() == TOKEN and stat.S_IMODE(os.stat(str(prev)).st_mode) == 0o600
    assert profile.read_text().startswith("# managed by sparkforge") and "export TORCH_CUDA_ARCH_LIST" in \
        profile.read_text()


@pytest.mark.parametrize("rows", [pytest.param(("O14",), id="O14")])
def test_the_llvm_role_never_repoints_a_users_tool_at_an_unversioned_name(tmp_path, rows):
    """The llvm role links clang, clang++, ld.lld and llvm-config in llvm_link_dir to the distribution's versioned
    tools; a user's tool there (a link to their own toolchain, a script) is refused before apt runs, in check mode
    too. Before: the link was repointed (file, state link). A link of sparkforge's (to /usr/bin/TOOL-VERSION) is
    not refused."""
    links = tmp_path / "bin"
    links.mkdir()
    os.symlink("/opt/my-llvm-20/bin/clang", str(links / "clang"))
    (links / "llvm-config").write_text("#!/bin/sh\necho mine\n")
    os.symlink("/usr/bin/ld.lld-18", str(links / "ld.lld"))  # an earlier run's link, another version
    # Its own link for a name with regex characters in it (molecule's triton rerun refused clang++'s).
    os.symlink("/usr/bin/clang++-19", str(links / "clang++"))
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  connection: local\n  gather_facts: false\n  roles:\n"
                    "    - role: sparkforge.stack.llvm\n      vars:\n        llvm_version: '19'\n"
                    "        llvm_link_dir: %s\n" % links)
    before = listing(links)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    for extra in (["--check"], []):
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                               str(play), "-e", "ansible_python_interpreter=" + sys.executable] + extra, cwd=REPO,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              timeout=300, check=False)
        out = flat(proc.stdout)
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert ("llvm_link_dir=%s: clang (a link to /opt/my-llvm-20/bin/clang), llvm-config (a file) not a link "
                "sparkforge made" % links) in out, proc.stdout[-3000:]
        assert "Install LLVM" not in proc.stdout and listing(links) == before


@pytest.mark.parametrize("rows", [pytest.param(("O16", "O17"), id="O16+O17")])
def test_a_users_file_at_the_proof_or_generation_record_path_is_refused_before_any_change(tmp_path, rows):
    """sparkforge_proof_file (the fleet_install role's proof) and sparkforge_host_generation_file (the host's
    generation record) were written whatever was there. A JSON file of the user's at the one, a directory at the
    other: `--check` and the real run refuse in preflight, naming each variable and what to do; nothing changed."""
    host = make_host(tmp_path, None, "existing", venv=False, components=["runtime_env"])
    proof = host["prefix"] / "provisioned.json"
    proof.write_text('{"compared": {"torch": "mine"}, "note": "the user\'s"}\n')
    os.chmod(str(proof), 0o600)
    record = host["prefix"] / "generation.json"
    record.mkdir()
    (record / "keep.txt").write_text("the user's\n")
    watched = [host["prefix"]]
    before = listing(*watched)
    for extra in (["--check"], []):
        proc, _ = playbook(host, *extra)
        out = flat(proc.stdout)
        assert proc.returncode == 2, proc.stdout[-4000:]
        assert ("sparkforge_proof_file=%s: %s is a file sparkforge did not write (not the proof of provisioning"
                % (proof, proof)) in out, ("O16", proc.stdout[-4000:])
        assert "Move it away, or set sparkforge_proof_file to another path" in out, out[-3000:]
        assert "sparkforge_host_generation_file=%s is a directory, not a file" % record in out, \
            ("O17", proc.stdout[-4000:])
        assert "TASK [sparkforge.stack.runtime_env" not in proc.stdout
        assert listing(*watched) == before, "a refused run changed the user's files"
