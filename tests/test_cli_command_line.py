"""The command line as ansible-playbook takes it, and the environment a run starts ansible-playbook in
(sparkforge.api.environment, used by the CLI and scripts/spark): property tests over argv lists and
environments, through the CLI's own main() (no playbook runs: every case stops before one, or the inventory
is missing so the run ends at once with the arguments it was given)."""

import io
import json
import os
import re
import string

import pytest
from hypothesis import given, settings, strategies as st

from helpers import REPO
from sparkforge import cli
from sparkforge.api import environment

KEY = st.from_regex(r"\A[a-z][a-z0-9_]{0,15}\Z")
# A word a shell could leave after a value split at a space: no option (no leading -), no key=value.
WORD = st.text(string.ascii_letters + string.digits + "/._~", min_size=1, max_size=12).filter(
    lambda w: not w.startswith("-"))
SETTINGS = settings(max_examples=60, deadline=None)


def main(argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.bad_input_rows("L01")
@SETTINGS
@given(key=KEY, words=st.lists(WORD, min_size=2, max_size=4), spelling=st.sampled_from(["-e", "--extra-vars"]),
       command=st.sampled_from(["provision", "plan", "cluster", "status", "verify"]), tail=st.booleans())
def test_an_extra_var_the_shell_split_is_refused_naming_it(tmp_path_factory, key, words, spelling, command, tail):
    """`-e sparkforge_venv=$DIR` with a space in $DIR: the words after the -e value are named, exit 4, before any
    run (argparse alone said "unrecognized arguments", and ansible-playbook took the stray word for a playbook)."""
    value = "%s=%s" % (key, words[0])
    argv = [command, "-i", "/nonexistent/inventory.yml", spelling, value] + words[1:] + (["-q"] if tail else [])
    code, out, err = main(argv)
    assert code == 4, out + err
    assert "%s %s is followed by %s, which is no option" % (spelling, value, " ".join(repr(w) for w in words[1:])) \
        in err, err
    assert "PLAY" not in out and "inventory not found" not in out


@SETTINGS
@given(pairs=st.lists(st.tuples(KEY, WORD), min_size=1, max_size=4), split=st.booleans())
def test_key_value_strings_in_one_word_or_many_options_are_not_refused(pairs, split):
    """`-e 'a=1 b=2'` (one word holding several pairs) and `-e a=1 -e b=2` are what ansible-playbook takes."""
    if split:
        argv = [w for key, value in pairs for w in ("-e", "%s=%s" % (key, value))]
    else:
        argv = ["-e", " ".join("%s=%s" % pair for pair in pairs)]
    assert environment.argv_problems(["provision", "-i", "x"] + argv + ["--check", "-l", "h1"]) == []
    # A playbook after the -e value is ansible-playbook's own positional argument (scripts/spark's case).
    assert environment.argv_problems(argv + ["site.yml"], positional_ok=True) == []


@pytest.mark.bad_input_rows("L02")
@SETTINGS
@given(value=st.text(" ,:", max_size=4), spelling=st.sampled_from(["-l", "--limit", "--limit="]))
def test_an_empty_limit_is_refused(value, spelling):
    """`-l "$HOST"` with HOST unset would run on every host: refused, naming the option."""
    argv = ["provision", "-i", "/nonexistent.yml"] + ([spelling + value] if spelling.endswith("=") else
                                                       [spelling, value])
    code, out, err = main(argv)
    assert code == 4, out + err
    assert "is empty: it would run on every host of the inventory" in err, err


@pytest.mark.bad_input_rows("L03")
@SETTINGS
@given(value=st.text(" ,", max_size=4), spelling=st.sampled_from(["-t", "--tags", "--skip-tags"]))
def test_an_empty_tag_list_is_refused(value, spelling):
    code, out, err = main(["provision", "-i", "/nonexistent.yml", "-t", "preflight", spelling, value])
    assert code == 4, out + err
    assert "%s %r names no tag" % (spelling, value) in err, err


@SETTINGS
@given(groups=st.lists(st.lists(st.sampled_from(["preflight", "pytorch", "verify", "cuda", "x1"]), min_size=1,
                                max_size=3), min_size=1, max_size=4))
def test_repeated_tags_add_up_as_with_ansible_playbook(tmp_path_factory, groups):
    """`-t preflight -t pytorch` runs both (only the last was kept): the run gets every tag, once, in order."""
    argv = ["provision", "--json", "-q", "-i", "/nonexistent/inventory.yml"]
    for group in groups:
        argv += ["-t", ",".join(group)]
    code, out, err = main(argv)
    assert code == 4, out + err  # the inventory is missing: the run ends at once, with the arguments it got
    expected = []
    for tag in (t for group in groups for t in group):
        if tag not in expected:
            expected.append(tag)
    assert json.loads(out)["tags"] == expected


def test_a_key_value_string_with_a_stray_word_is_refused_naming_it():
    """One -e word holding a value with a space (quoted for the shell, not for Ansible): Ansible keeps the part
    before the space and puts the rest in _raw_params; the CLI refuses it, naming the word."""
    code, out, _ = main(["provision", "--json", "-i", "/nonexistent.yml", "-e", "sparkforge_venv=/opt/my venv"])
    assert code == 4
    assert "'venv' is no key=value" in json.loads(out)["error"]


# ----------------------------------------------------------------------------------------- the environment


def test_the_protections_are_settings_ansible_knows_and_the_checkout_sets():
    """Each variable overridden is the environment name of a setting of ansible-core (a rename would leave the
    protection off without a word), and each is one the checkout's ansible.cfg sets."""
    from ansible.config.manager import ConfigManager

    envs = {}
    for setting, definition in ConfigManager().get_configuration_definitions().items():
        for env in definition.get("env") or []:
            envs[env["name"]] = [(ini["section"], ini["key"]) for ini in definition.get("ini") or []]
    with open(os.path.join(REPO, "ansible.cfg")) as handle:
        cfg = handle.read()
    for name in environment.PROTECTIONS:
        assert name in envs, name
        assert any(re.search(r"^%s\s*=" % key, cfg, re.M) for _, key in envs[name]), (name, envs[name])


PROTECTED = sorted(environment.PROTECTIONS)


@pytest.mark.bad_input_rows("L04")
@SETTINGS
@given(user=st.dictionaries(st.sampled_from(PROTECTED + ["ANSIBLE_CONFIG"]),
                            st.sampled_from(["warn", "ignore", "False", "0", "no", "error", "True", "/tmp/my.cfg"])))
def test_the_checkouts_config_and_protections_win_over_the_environment_saying_so(user):
    config = os.path.join(REPO, "ansible.cfg")
    changes, notes = environment.run_environment(dict(user), config)
    assert changes["ANSIBLE_CONFIG"] == config
    for name in PROTECTED:
        assert changes[name] == environment.PROTECTIONS[name][0]
    for name, value in user.items():
        keeps = value == environment.PROTECTIONS.get(name, (None,))[0] or (
            name != "ANSIBLE_CONFIG" and environment.PROTECTIONS[name][0] == "True" and value == "True")
        said = [n for n in notes if n.startswith("%s=%s from the environment" % (name, value))]
        assert len(said) == (0 if keeps else 1), (name, value, notes)


@pytest.mark.bad_input_rows("L05")
@pytest.mark.parametrize("env,changed", [
    ({"LC_ALL": "C"}, True), ({"LC_ALL": "POSIX"}, True), ({"LANG": "en_US.ISO-8859-1"}, True),
    ({"LC_CTYPE": "C", "LANG": "en_US.UTF-8"}, True), ({"LC_ALL": "C.UTF-8", "LANG": "C"}, False),
    ({"LANG": "en_US.utf8"}, False), ({}, False),
])
def test_a_locale_that_is_not_utf8_gets_c_utf8_saying_so(env, changed):
    changes, notes = environment.run_environment(env, None)
    assert (changes.get("LC_ALL") == "C.UTF-8") is changed
    assert len([n for n in notes if "is not a UTF-8 locale, which ansible-core needs" in n]) == int(changed)


@pytest.mark.parametrize("args,message", [
    (["-e", "sparkforge_venv=/opt/my", "venv"], "-e sparkforge_venv=/opt/my is followed by 'venv', which is no option"),
    (["--limit", ""], "--limit '' is empty: it would run on every host"),
    (["-t", ","], "-t ',' names no tag"),
])
def test_scripts_spark_refuses_the_same_before_ansible_playbook_starts(tmp_path, args, message):
    """scripts/spark execs ansible-playbook through sparkforge.api.environment: the same checks, exit 4, and
    the program never runs (here a stand-in that would write a file)."""
    import subprocess
    import sys

    marker = tmp_path / "ran"
    program = tmp_path / "ansible-playbook"
    program.write_text("#!/bin/sh\ntouch %s\n" % marker)
    program.chmod(0o755)
    proc = subprocess.run([sys.executable, "-m", "sparkforge.api.environment", REPO, str(program), "site.yml"] + args,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    assert proc.returncode == 4 and message in proc.stdout, proc.stdout
    assert not marker.exists()
    proc = subprocess.run([sys.executable, "-m", "sparkforge.api.environment", REPO, str(program), "site.yml", "-e",
                           "a=1 b=2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=60)
    assert proc.returncode == 0 and marker.exists(), proc.stdout
