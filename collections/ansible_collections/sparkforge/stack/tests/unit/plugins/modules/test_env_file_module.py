"""env_file: the Triton role's runtime variables in one call (run for real on this machine)."""

import os
import stat
import subprocess

from ansible_collections.sparkforge.stack.tests.unit.utils.harness import run_module

from ansible_collections.sparkforge.stack.plugins.module_utils.host.env_file import HEADER


def test_writes_once_then_changes_nothing_and_a_shell_reads_the_values_back(tmp_path):
    path = tmp_path / "env.d" / "triton.sh"
    args = {"path": str(path), "comment": "Written by a test.\nSecond line.",
            "variables": {"TRITON_PTXAS_PATH": "/usr/local/cuda 13/bin/ptxas", "ODD": "a$b'c"}}
    preview, rc = run_module("env_file", args, check_mode=True, diff=True)
    assert rc == 0 and preview["changed"] and preview["created_dir"] and not path.exists(), preview
    assert "export ODD=" in preview["diff"]["after"]
    first, rc = run_module("env_file", args)
    assert rc == 0 and first["changed"], first
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    text = path.read_text()
    # The first line makes the file sparkforge's own (a later run may rewrite it); then the comment.
    assert text.startswith(HEADER + "\n# Written by a test.\n# Second line.\n"), text
    shell = subprocess.run(["sh", "-c", '. "$1"; printf "%s|%s" "$TRITON_PTXAS_PATH" "$ODD"', "sh", str(path)],
                           stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    assert shell == "/usr/local/cuda 13/bin/ptxas|a$b'c"
    again, rc = run_module("env_file", args)
    assert rc == 0 and not again["changed"] and not again["created_dir"], again
    os.chmod(path, 0o600)
    mode, rc = run_module("env_file", args)
    assert rc == 0 and mode["changed"] and stat.S_IMODE(os.stat(path).st_mode) == 0o644, mode


def test_a_changed_value_is_rewritten_with_its_diff(tmp_path):
    path = tmp_path / "triton.sh"
    run_module("env_file", {"path": str(path), "variables": {"A": "1"}})
    result, rc = run_module("env_file", {"path": str(path), "variables": {"A": "2"}}, diff=True)
    assert rc == 0 and result["changed"], result
    assert result["diff"]["before"] == HEADER + "\nexport A=1\n"
    assert result["diff"]["after"] == HEADER + "\nexport A=2\n"
    assert path.read_text() == HEADER + "\nexport A=2\n"
    # The rewrite kept the version it replaced beside it.
    assert result["kept"] == str(path) + ".sparkforge-prev"
    assert (tmp_path / "triton.sh.sparkforge-prev").read_text() == HEADER + "\nexport A=1\n"


def test_bad_input_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "d" / "x.sh"
    for variables, words in (({"1BAD": "x"}, "not shell variable names: '1BAD'"),
                             ({"A-B": "x"}, "not shell variable names: 'A-B'"),
                             ({"A": "two\nlines"}, "A holds a newline"),
                             ({"A": ["x"]}, "A must be a string or a number")):
        result, rc = run_module("env_file", {"path": str(path), "variables": variables})
        assert rc != 0 and words in result["msg"] and "nothing written" in result["msg"], result
    relative, rc = run_module("env_file", {"path": "env.d/x.sh", "variables": {"A": "1"}})
    assert rc != 0 and "must be absolute" in relative["msg"], relative
    directory, rc = run_module("env_file", {"path": str(tmp_path), "variables": {"A": "1"}})
    assert rc != 0 and "is a directory" in directory["msg"], directory
    assert not (tmp_path / "d").exists()
