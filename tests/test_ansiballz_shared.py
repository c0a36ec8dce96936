"""The suite's shared AnsiballZ cache (tests/plugins/callback/ansiballz_shared.py): a run keeps Ansible's
payloads under a directory named by a hash of every file a payload can hold, so a changed module_utils file
can never be served from a payload built before the change."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins", "callback"))
import ansiballz_shared  # noqa: E402

from helpers import REPO  # noqa: E402

BIN = os.path.dirname(sys.executable)


def test_the_key_follows_every_file_a_payload_can_hold(tmp_path):
    root = tmp_path / "module_utils"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.py").write_text("X = 1\n")
    (root / "b.py").write_text("Y = 1\n")
    first = ansiballz_shared._key([str(root)])
    assert ansiballz_shared._key([str(root)]) == first
    (root / "sub" / "a.py").write_text("X = 2\n")
    changed = ansiballz_shared._key([str(root)])
    assert changed != first
    (root / "sub" / "c.py").write_text("")
    assert ansiballz_shared._key([str(root)]) not in (first, changed)
    # Bytecode caches are not what a payload holds.
    before = ansiballz_shared._key([str(root)])
    (root / "sub" / "__pycache__").mkdir()
    (root / "sub" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert ansiballz_shared._key([str(root)]) == before


def test_a_run_keeps_its_payloads_in_the_shared_directory_and_a_changed_collection_gets_its_own(tmp_path):
    playbook = tmp_path / "p.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                        "    - sparkforge.stack.paths_usable: {paths: [{path: %s, kind: dir, variable: x}]}\n"
                        % (tmp_path / "work"))
    shared = tmp_path / "shared"

    def run(collections):
        env = dict(os.environ, SPARKFORGE_TEST_ANSIBALLZ_CACHE=str(shared), ANSIBLE_COLLECTIONS_PATH=collections,
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, "tests", "plugins", "callback"),
                   ANSIBLE_CALLBACKS_ENABLED="ansiballz_shared", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return sorted(os.listdir(shared))

    keys = run(os.path.join(REPO, "collections"))
    assert len(keys) == 1
    payloads = os.listdir(shared / keys[0])
    assert "ansible_collections.sparkforge.stack.plugins.modules.paths_usable-ZIP_DEFLATED-none" in payloads
    # The same collection with one module_utils file changed: another directory, built anew.
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", os.path.join(REPO, "collections"), str(copy)], check=True)
    utils = copy / "ansible_collections" / "sparkforge" / "stack" / "plugins" / "module_utils" / "_common"
    with open(utils / "files.py", "a") as handle:
        handle.write("\n# changed\n")
    assert len(run(str(copy))) == 2


def _zip(files):
    import base64
    import io
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as handle:
        for name, text in files.items():
            handle.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), text)
    return base64.b64encode(out.getvalue())


def _import_from(tmp_path, zip_b64, name):
    import base64
    import importlib.util
    import zipimport
    path = tmp_path / ("%s.zip" % name)
    path.write_bytes(base64.b64decode(zip_b64))
    spec = zipimport.zipimporter(str(path)).find_spec(name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_payload_with_bytecode_runs_its_source_and_a_stale_pyc_is_never_used(tmp_path):
    import base64
    import io
    import zipfile
    payload = ansiballz_shared.with_bytecode(_zip({"m1.py": "VALUE = 41 + 1\n", "bad.py": "def (:\n"}))
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(payload))).namelist()
    # A .pyc beside each .py that compiles; a file that does not compile is left for the host to refuse.
    assert sorted(names) == ["bad.py", "m1.py", "m1.pyc"]
    assert _import_from(tmp_path, payload, "m1").VALUE == 42
    # The .pyc of another source beside this one (hash-checked): the source is what runs.
    old = zipfile.ZipFile(io.BytesIO(base64.b64decode(ansiballz_shared.with_bytecode(_zip({"m2.py": "VALUE = 1\n"})))))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as handle:
        handle.writestr("m2.py", "VALUE = 2\n")
        handle.writestr("m2.pyc", old.read("m2.pyc"))
    assert _import_from(tmp_path, base64.b64encode(out.getvalue()), "m2").VALUE == 2
