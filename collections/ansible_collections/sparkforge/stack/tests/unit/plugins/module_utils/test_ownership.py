# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 52, item 1: nothing sparkforge did not make is destroyed or overwritten.

The env_file logic (host/env_file.py: whose a file is, the plan of a write, the write keeping the previous
version), files.keep_previous, and the ownership checks preflight runs (host/host_paths.py), on real files and
directories in tmp: a user's dotfile of mode 0600 holding a token, a venv made with ``python -m venv
--without-pip`` holding a package. Property tests: whatever the user put at the path (files of any text and
mode, directories, symlinks), a refused write changes nothing there, byte for byte and mode for mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils._common.files import PREV_SUFFIX, keep_previous
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet.fleet_install_job import FleetWheelInstallJob
from ansible_collections.sparkforge.stack.plugins.module_utils.host import env_file, host_paths, records, venv
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import JobError

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position

TOKEN = "export HF_TOKEN=hf_secret_value_123\n"


def mode_of(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


def listing(top):
    """Every path under ``top`` (``top`` itself included) with its mode, owner and bytes or link target."""
    out = {}
    paths = [str(top)]
    for base, dirs, files in os.walk(str(top)):
        paths += [os.path.join(base, n) for n in dirs + files]
    for path in paths:
        if not os.path.lexists(path):
            continue
        st_ = os.lstat(path)
        if stat.S_ISLNK(st_.st_mode):
            data = os.readlink(path)
        elif stat.S_ISREG(st_.st_mode):
            with open(path, "rb") as handle:
                data = handle.read()
        else:
            data = None
        out[os.path.relpath(path, str(top))] = (st_.st_mode, st_.st_uid, st_.st_gid, data)
    return out


def users_dotfile(path):
    path.write_text(TOKEN)
    os.chmod(str(path), 0o600)


def test_a_users_file_with_a_token_is_refused_naming_the_choices_and_never_shown(tmp_path):
    """Before: replaced by sparkforge's exports, made 0644, no copy kept."""
    path = tmp_path / "sparkforge.sh"
    users_dotfile(path)
    before = listing(tmp_path)
    state, words = env_file.ownership(str(path))
    assert state == "user" and "mode 0600" in words and "hf_secret" not in words, words
    text = env_file.render({"A": "1"})
    with pytest.raises(env_file.EnvFileError) as exc:
        env_file.plan_write(str(path), text, variable="runtime_env_profile_path",
                            adopt_variable="runtime_env_profile_adopt")
    msg = str(exc.value)
    assert msg.startswith("runtime_env_profile_path=%s: %s is a file sparkforge did not make" % (path, path)), msg
    assert "set runtime_env_profile_adopt: true" in msg and "set runtime_env_profile_path to another path" in msg
    assert "nothing was changed" in msg and "hf_secret" not in msg
    # The same refusal from preflight's check, which runs before any role.
    problems = host_paths.paths_problems([{"variable": "runtime_env_profile_path", "path": str(path), "kind": "file",
                                           "own": "file", "adopt_variable": "runtime_env_profile_adopt"}])
    assert problems == [msg], problems
    assert listing(tmp_path) == before


def test_an_adopted_file_is_kept_with_its_mode_then_rewritten_and_each_rewrite_keeps_the_last(tmp_path):
    path = tmp_path / "sparkforge.sh"
    users_dotfile(path)
    text = env_file.render({"A": "1"})
    plan = env_file.plan_write(str(path), text, adopt=True)
    assert plan["changed"] and plan["kept"] == str(path) + PREV_SUFFIX, plan
    assert "hf_secret" not in plan["before"], "the diff would show the user's token"
    notes = []
    entry = {"variable": "v", "path": str(path), "kind": "file", "own": "file", "adopt": True,
             "adopt_variable": "runtime_env_profile_adopt"}
    assert host_paths.paths_problems([entry], notes=notes) == []
    assert len(notes) == 1 and "adopted (runtime_env_profile_adopt)" in notes[0] and PREV_SUFFIX in notes[0], notes
    env_file.write(str(path), text, plan)
    prev = tmp_path / ("sparkforge.sh" + PREV_SUFFIX)
    assert prev.read_text() == TOKEN and mode_of(prev) == 0o600, "the user's file was not kept as it was"
    assert path.read_text() == text and env_file.ownership(str(path))[0] == "ours"
    # O08: ours now: no adoption needed; an unchanged text writes nothing; a changed one keeps the one it replaces.
    assert not env_file.plan_write(str(path), text)["changed"]
    newer = env_file.render({"A": "2"})
    plan = env_file.plan_write(str(path), newer)
    assert plan["before"] == text and plan["kept"] == str(prev), plan
    env_file.write(str(path), newer, plan)
    assert prev.read_text() == text and path.read_text() == newer, "O08"


def test_files_earlier_versions_wrote_are_sparkforges(tmp_path):
    """The runtime_env template's first line and the triton role's comment, as an upgrade finds them."""
    for first in ("# Ansible managed (sparkforge.stack.runtime_env)",
                  "# Written by sparkforge (role sparkforge.stack.triton); changes are overwritten."):
        path = tmp_path / "old.sh"
        path.write_text(first + "\nexport A=1\n")
        assert env_file.ownership(str(path))[0] == "ours", first
    for first in ("# managed by someone else", "export A=1", "#!/bin/sh", ""):
        path.write_text(first + "\nexport A=1\n")
        assert env_file.ownership(str(path))[0] == "user", first


def test_keep_previous_copies_where_a_link_cannot_be_made(tmp_path, monkeypatch):
    """A file system without hard links: a copy, made 0600 first, then given the original's mode."""
    path = tmp_path / "f"
    path.write_text("old\n")
    os.chmod(str(path), 0o640)

    def no_link(*args, **kwargs):
        raise OSError(1, "Operation not permitted")
    monkeypatch.setattr(os, "link", no_link)
    prev = keep_previous(str(path))
    assert open(prev).read() == "old\n" and mode_of(prev) == 0o640
    assert os.stat(prev).st_ino != os.stat(str(path)).st_ino
    assert sorted(os.listdir(str(tmp_path))) == ["f", "f" + PREV_SUFFIX], "a temporary file was left"


# What a user may have at the path: a file (any text not starting with sparkforge's line, any mode), a symlink, or a
# directory holding files.
_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80).filter(lambda t: not env_file.is_managed(t))
_modes = st.sampled_from([0o600, 0o644, 0o400, 0o640, 0o755, 0o000])
_things = st.one_of(
    st.tuples(st.just("file"), _texts, _modes),
    st.tuples(st.just("link"), st.sampled_from(["elsewhere", "/etc/hostname", "sparkforge.sh"]), st.just(0)),
    st.tuples(st.just("dir"), _texts, _modes.filter(lambda m: m & 0o500 == 0o500)),
)


def _make(path, thing):
    kind, text, mode = thing
    if kind == "file":
        with open(str(path), "w") as handle:
            handle.write(text)
        os.chmod(str(path), mode)
    elif kind == "link":
        os.symlink(text, str(path))
    else:
        os.mkdir(str(path))
        with open(os.path.join(str(path), "inside.txt"), "w") as handle:
            handle.write(text)
        os.chmod(str(path), mode)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(thing=_things, variables=st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True),
                                                st.text("abc $'/", max_size=8), max_size=3))
def test_whatever_the_user_has_at_a_file_path_a_write_not_adopting_it_changes_nothing(
        tmp_path_factory, thing, variables):
    top = tmp_path_factory.mktemp("own")
    path = top / "sparkforge.sh"
    _make(path, thing)
    before = listing(top)
    text = env_file.render(variables)
    try:
        env_file.write(str(path), text, env_file.plan_write(str(path), text, variable="runtime_env_profile_path"))
    except env_file.EnvFileError as exc:
        assert str(exc).startswith("runtime_env_profile_path=%s" % path) and "nothing" in str(exc), str(exc)
    else:
        raise AssertionError(("O09", "%r at the path was written over" % (thing,)))
    assert problems_for(path, "file") and listing(top) == before


def problems_for(path, own):
    return host_paths.paths_problems([{"variable": "v", "path": str(path), "kind": "dir" if own == "venv" else "file",
                                       "own": own, "adopt_variable": "a"}])


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """A venv without pip (what `python -m venv --without-pip` and `uv venv` make) holding a package of the user's."""
    path = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.check_output([str(path / "bin" / "python"), "-c",
                                    "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   universal_newlines=True).strip()
    os.makedirs(os.path.join(site, "mylib-1.0.dist-info"))
    with open(os.path.join(site, "mylib.py"), "w") as handle:
        handle.write("VALUE = 42\n")
    return path


def test_preflight_refuses_a_users_venv_without_pip_and_notes_an_adopted_one(bare_venv):
    before = listing(bare_venv)
    problems = problems_for(bare_venv, "venv")
    assert len(problems) == 1 and "is a venv sparkforge did not make" in problems[0], problems
    assert "without pip" in problems[0] and "mylib-1.0" in problems[0] and "set a: true" in problems[0]
    notes = []
    assert host_paths.paths_problems([{"variable": "sparkforge_venv", "path": str(bare_venv), "own": "venv",
                                       "adopt": True, "adopt_variable": "sparkforge_venv_adopt"}], notes=notes) == []
    assert "adopted (sparkforge_venv_adopt)" in notes[0] and "ensurepip" in notes[0], notes
    assert listing(bare_venv) == before


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.from_regex(r"[a-z][a-z0-9_.-]{0,10}", fullmatch=True), min_size=1, max_size=4, unique=True),
       text=_texts, mode=_modes.filter(lambda m: m & 0o700 == 0o700), cfg=st.booleans(), python=st.booleans(),
       adopt=st.booleans())
def test_whatever_directory_the_user_has_at_the_venv_path_the_venv_job_plans_nothing_destructive(
        tmp_path_factory, names, text, mode, cfg, python, adopt):
    """A directory sparkforge did not make (files of any name; a pyvenv.cfg or not): refused, or adopted in place;
    never planned for removal, and the plan changes nothing."""
    top = tmp_path_factory.mktemp("venvpath")
    path = top / "venv"
    path.mkdir()
    for name in names:
        if name not in ("bin", "pyvenv.cfg"):
            (path / name).write_text(text)
    if cfg:
        (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    if python:
        (path / "bin").mkdir(exist_ok=True)
        os.symlink(sys.executable, str(path / "bin" / "python"))
    os.chmod(str(path), mode)
    before = listing(top)
    job = venv.VenvJob({"path": str(path), "python": sys.executable, "adopt": adopt}, _NoRun(), check_mode=True)
    try:
        plan = job.plan()
    except venv.JobError as exc:
        assert "nothing" in exc.msg and str(path) in exc.msg, exc.msg
        assert not (adopt and cfg and python), "an adoptable venv was refused: %s" % exc.msg
    else:
        assert plan.state["action"] == "adopt" and adopt and cfg and python, plan.result
    assert listing(top) == before


class _NoRun:
    """The host's commands, answered as a venv without bin/python would: nothing runs."""

    def run(self, cmd, env=None, cwd=None):
        return 127, "", "no such file"


# ------------------------------------------------------------------ the JSON records (the proof, the generation)

RECORD_VARIABLES = {"proof": "sparkforge_proof_file", "generation": "sparkforge_host_generation_file"}
GENERATION = {"lineage": "L1", "class": "spark", "number": 2}
_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=6),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=8)
# What a user may have at a record's path: JSON of any shape (an object of other keys, a marker of another
# kind or a wrong value, the earlier shape with a key more or less), text, an empty file, a symlink, a directory.
_record_things = st.one_of(
    st.tuples(st.just("json"), _json_values),
    st.tuples(st.just("json"), st.dictionaries(st.sampled_from(sorted(records.LEGACY["generation"][0] | {
        "compared", "profile", "token", records.MARKER_KEY})), _json_values, min_size=1, max_size=10)),
    st.tuples(st.just("json"), st.sampled_from([
        {records.MARKER_KEY: "sparkforge"}, {records.MARKER_KEY: records.MARKERS["proof"], "generation": 1},
        {"compared": {}, "profile": {}, "token": "x"}, {"compared": {}}, {"compared": [], "profile": {}}])),
    st.tuples(st.just("text"), st.text(max_size=30)),
    st.tuples(st.just("link"), st.sampled_from(["elsewhere.json", "/etc/hostname"])),
    st.tuples(st.just("dir"), st.text(max_size=10)),
)


def _make_record_thing(path, thing):
    kind, value = thing
    if kind == "json":
        path.write_text(json.dumps(value))
        os.chmod(str(path), 0o600)
    elif kind == "text":
        path.write_text(value)
    elif kind == "link":
        os.symlink(value, str(path))
    else:
        path.mkdir()
        (path / "inside.txt").write_text(value)


def _ours(record_kind, thing):
    """Whether ``thing`` happens to be a record of sparkforge's (the strategies can draw the earlier shape)."""
    return thing[0] == "json" and records.is_ours(record_kind, thing[1])


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(thing=_record_things, record_kind=st.sampled_from(sorted(RECORD_VARIABLES)))
def test_whatever_the_user_has_at_a_record_path_preflight_and_the_writers_refuse_it_changing_nothing(
        tmp_path_factory, thing, record_kind):
    """O16, O17 (issue 52): whatever is at sparkforge_proof_file or sparkforge_host_generation_file that is not
    sparkforge's JSON record - any other JSON, text, a symlink, a directory - preflight's check refuses, naming the
    variable and what to do; the generation record's writers (fleet_wheel_install's plan, write_host) refuse it too;
    the path stays byte for byte."""
    top = tmp_path_factory.mktemp("records")
    path = top / os.path.basename(record_kind + ".json")
    _make_record_thing(path, thing)
    if _ours(record_kind, thing):
        return
    before = listing(top)
    variable = RECORD_VARIABLES[record_kind]
    found = host_paths.paths_problems([{"variable": variable, "path": str(path), "kind": "file", "own": record_kind}])
    assert len(found) == 1 and found[0].startswith("%s=%s" % (variable, path)), ("O16", thing, found)
    assert "is a directory, not a file" in found[0] or (
        "nothing was changed; sparkforge writes %s there. Move it away, or set %s to another path"
        % (records.WHAT[record_kind], variable)) in found[0], ("O16", found)
    if record_kind == "generation":
        with pytest.raises(gen.GenerationError) as info:
            gen.write_host(str(path), gen.host_transition({}, GENERATION, "installing", "first", "t"))
        assert str(info.value).startswith("%s=%s" % (variable, path)), ("O17", info.value)
        job = FleetWheelInstallJob(dict(venv=str(top / "venv"), wheel_dir=str(top), wheels=[], pip_extra_args="",
                                        python="python3", copies="fail", rehash=False, generation=GENERATION,
                                        venv_state=[], host_record=str(path)), FakeSystem(), check_mode=True)
        with pytest.raises(JobError) as info:
            job.plan()
        assert info.value.msg.startswith("sparkforge_host_generation_file=%s" % path), ("O17", info.value.msg)
    assert listing(top) == before


def test_records_sparkforge_writes_and_the_earlier_shapes_are_its_own(tmp_path):
    """O16, O17: the records this version writes (with the marker) and the ones the previous version wrote (its exact
    keys, no marker) pass; a record is written again, keeping its marker; read_host does not show the marker."""
    path = tmp_path / "generation.json"
    first = gen.host_transition({}, GENERATION, "installing", "first install", "t")
    legacy = dict(first)
    path.write_text(json.dumps(legacy))
    assert records.ownership(str(path), "generation")[0] == "ours", "O17"
    assert host_paths.paths_problems([{"variable": "v", "path": str(path), "kind": "file", "own": "generation"}]) == []
    gen.write_host(str(path), gen.host_transition(gen.read_host(str(path)), GENERATION, "installed", "first", "t"))
    assert json.loads(path.read_text())[records.MARKER_KEY] == records.MARKERS["generation"]
    assert records.MARKER_KEY not in gen.read_host(str(path)) and gen.read_host(str(path))["state"] == "installed"
    proof = tmp_path / "provisioned.json"
    proof.write_text(json.dumps({"compared": {"torch": "2.9.1"}, "profile": {}}, indent=2))
    assert records.ownership(str(proof), "proof")[0] == "ours", "O16"
    proof.write_text(json.dumps({"compared": {"torch": "2.9.1"}}))  # the first version's proof
    assert records.ownership(str(proof), "proof")[0] == "ours", "O16"
    proof.write_text(json.dumps(records.mark("proof", {"compared": {}, "profile": {}, "more": 1})))
    assert records.ownership(str(proof), "proof")[0] == "ours"
    # A record of the other kind is not this one's.
    assert records.ownership(str(path), "proof")[0] == "user"
