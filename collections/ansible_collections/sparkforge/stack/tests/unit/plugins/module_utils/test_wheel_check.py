# -*- coding: utf-8 -*-
"""Every wheel of a wheelhouse proven before the venv is touched (module_utils/packages/wheel_check.py, issue 52 item 6):
the file name against the METADATA inside the wheel (name, version, local tag), the platform tags against the host's
machine and glibc, the Python tags against the venv's Python. The wheels are real zips this test writes (their
.dist-info METADATA, WHEEL and RECORD), as a build tool lays them out. The same rows through
stack_plan in check mode: tests/integration/test_every_byte.py (W14-W17)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import zipfile

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import wheel_check
from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import (
    PYTHON_READ, venv_python_version)

sys.path.insert(0, os.path.dirname(__file__))
from fake_system import FakeSystem  # noqa: E402  pylint: disable=wrong-import-position


def wheel(directory, filename, name=None, version=None, info=None):
    """A wheel zip named ``filename`` whose METADATA says ``name`` ``version`` (by default what the name says)."""
    fname, fversion = filename.split("-")[:2]
    name, version = name or fname, version or fversion
    info = info or "%s-%s.dist-info" % (fname, fversion.split("+")[0])
    path = os.path.join(str(directory), filename)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("%s/__init__.py" % fname, "")
        archive.writestr("%s/METADATA" % info, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n\nVersion: 9.9\n"
                         % (name, version))
        archive.writestr("%s/WHEEL" % info, "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        archive.writestr("%s/RECORD" % info, "")
    return path


def test_the_issue_torch_whose_metadata_says_another_version_is_named_with_both(tmp_path):
    path = wheel(tmp_path, "torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl", version="2.10.0")
    assert wheel_check.metadata_problem(path) == (
        "says torch 2.11.0 in its file name, but its METADATA (torch-2.11.0.dist-info/METADATA) says torch 2.10.0 "
        "(the version differs): pip refuses it after the venv is made; use the wheel as it was built, or rename it "
        "to what its METADATA says")
    found = wheel_check.wheelhouse_problems(str(tmp_path), {"torch": "2.11.0"}, "3.12", "aarch64",
                                            "pytorch_wheelhouse", "2.39")
    assert found == ["the wheelhouse %s (pytorch_wheelhouse): %s %s"
                     % (tmp_path, path, wheel_check.metadata_problem(path))]


@pytest.mark.parametrize("filename,name,version,differs", [
    ("torch-2.11.0+cu130-cp312-cp312-linux_aarch64.whl", "torch", "2.11.0+cu129", "local tag"),
    ("torch-2.11.0+cu130-cp312-cp312-linux_aarch64.whl", "torch", "2.11.0", "local tag"),
    ("torch-2.11.0-cp312-cp312-linux_aarch64.whl", "torchvision", "2.11.0", "name"),
    ("torch-2.11.0-cp312-cp312-linux_aarch64.whl", "pytorch", "2.1.0", "name and version"),
])
def test_a_name_or_local_tag_the_metadata_does_not_say_is_refused(tmp_path, filename, name, version, differs):
    message = wheel_check.metadata_problem(wheel(tmp_path, filename, name=name, version=version))
    assert message and "says %s %s (the %s differ" % (name, version, differs) in message, message


@pytest.mark.parametrize("filename,name,version", [
    ("torch-2.11.0+cu130-cp312-cp312-linux_aarch64.whl", "torch", "2.11.0+cu130"),
    ("Torch_Audio-2.11-cp312-cp312-linux_aarch64.whl", "torch.audio", "2.11.0"),
    ("einops-0.8.1rc1-py3-none-any.whl", "einops", "0.8.1-RC.1"),
    ("nvidia_cudnn_cu13-9.13.0.50-py3-none-manylinux_2_27_aarch64.whl", "nvidia-cudnn-cu13", "9.13.0.50"),
])
def test_the_same_name_and_version_spelled_otherwise_passes(tmp_path, filename, name, version):
    assert wheel_check.metadata_problem(wheel(tmp_path, filename, name=name, version=version)) is None


def test_a_wheel_whose_dist_info_is_another_project_is_refused(tmp_path):
    path = wheel(tmp_path, "torch-2.11.0-cp312-cp312-linux_aarch64.whl", info="numpy-2.11.0.dist-info")
    assert wheel_check.metadata_problem(path).startswith(
        "says torch 2.11.0 in its file name, but its metadata directory is numpy-2.11.0.dist-info")


@pytest.mark.parametrize("platform,glibc,why", [
    ("manylinux_2_39_aarch64", "2.35",
     "is for manylinux_2_39_aarch64 (glibc 2.39 or newer), this host's glibc is 2.35"),
    ("manylinux2014_aarch64", "2.12", "is for manylinux2014_aarch64 (glibc 2.17 or newer), this host's glibc is 2.12"),
    ("manylinux_2_39_x86_64", "2.35", "is for manylinux_2_39_x86_64, this host is aarch64"),
    ("manylinux_2_28_aarch64", "2.35", None),
    ("manylinux_2_28_aarch64.manylinux_2_39_aarch64", "2.35", None),
    ("linux_aarch64", "2.17", None),
    ("manylinux_2_39_aarch64", None, None),  # a host whose glibc is not known: pip's to judge
])
def test_a_manylinux_tag_needing_a_newer_glibc_than_the_hosts_is_refused(platform, glibc, why):
    assert wheel_check.tag_problem("torch-2.11.0-cp312-cp312-%s.whl" % platform, "3.12", "arm64", glibc) == why


@settings(max_examples=200, derandomize=True, deadline=None)
@given(need=st.tuples(st.integers(2, 3), st.integers(0, 60)), have=st.tuples(st.integers(2, 3), st.integers(0, 60)),
       machine=st.sampled_from(["x86_64", "aarch64"]))
def test_property_a_manylinux_wheel_fits_exactly_when_its_glibc_is_at_most_the_hosts(need, have, machine):
    name = "torch-2.11.0-cp312-cp312-manylinux_%d_%d_%s.whl" % (need + (machine,))
    why = wheel_check.tag_problem(name, "3.12.1", machine, "%d.%d" % have)
    assert (why is None) == (need <= have), (name, have, why)
    if why:
        assert "glibc %d.%d or newer), this host's glibc is %d.%d" % (need + have) in why


@settings(max_examples=200, derandomize=True, deadline=None)
@given(tag=st.sampled_from(["cp311", "cp312", "cp313", "py3"]), abi=st.sampled_from(["cp311", "cp312", "abi3", "none"]),
       venv=st.sampled_from(["3.11", "3.12", "3.13"]))
def test_property_the_python_tag_is_judged_against_the_venvs_python(tag, abi, venv):
    """cpXY with its own ABI: only X.Y; abi3: X.Y and newer; py3-none: any 3.x; the venv's Python named."""
    why = wheel_check.tag_problem("torch-2.11.0-%s-%s-linux_x86_64.whl" % (tag, abi), venv, "x86_64", "2.39")
    minor = int(venv.split(".")[1])
    if tag == "py3":
        fits = abi == "none"
    elif abi == "abi3":
        fits = int(tag[3:]) <= minor
    elif abi == "none":
        fits = int(tag[3:]) == minor
    else:
        fits = tag == abi and int(tag[3:]) == minor
    assert (why is None) == fits, (tag, abi, venv, why)
    if why:
        assert why.endswith("the venv's Python is %s" % venv)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(release=st.lists(st.integers(0, 30), min_size=1, max_size=4), zeros=st.integers(0, 2),
       pre=st.sampled_from(["", "a1", "b2", "rc1", ".post1", ".dev3"]), local=st.sampled_from(["", "cu130", "cpu"]),
       bump=st.integers(0, 3))
def test_property_a_version_spelled_otherwise_is_the_same_and_another_release_is_not(release, zeros, pre, local, bump):
    text = ".".join(str(n) for n in release) + pre + ("+" + local if local else "")
    spelled = "v" + ".".join(str(n) for n in release + [0] * zeros) + pre.upper().replace("RC", "-rc").replace(
        "A", "alpha").replace("B", "beta") + ("+" + local.upper() if local else "")
    assert wheel_check.version_key(text) == wheel_check.version_key(spelled), (text, spelled)
    other = list(release)
    other[bump % len(other)] += 1
    assert wheel_check.version_key(text) != wheel_check.version_key(
        ".".join(str(n) for n in other) + pre + ("+" + local if local else ""))


def test_the_venvs_python_is_its_own_else_the_interpreter_it_is_made_with(tmp_path):
    """pip matches cpXY against the venv's Python: an existing venv's bin/python, else pytorch_venv_python found on
    the host (the stand-in host answers the read; a python that prints nothing gives None: the host's is used)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    own = str(venv / "bin" / "python")
    host = FakeSystem(commands={own: (0, "3.13\n", "")}, tools={"python3.12": "/usr/bin/python3.12"})
    assert venv_python_version(host, str(venv), "python3.12") == ("3.13", own)
    assert host.ran == [[own, "-c", PYTHON_READ]]
    host = FakeSystem(commands={"/usr/bin/python3.12": (0, "3.12\n", "")},
                      tools={"python3.12": "/usr/bin/python3.12"})
    assert venv_python_version(host, str(tmp_path / "none"), "python3.12") == ("3.12", "/usr/bin/python3.12")
    assert venv_python_version(FakeSystem(), str(tmp_path / "none"), "python3.12") == (None, None)
    host = FakeSystem(commands={"/usr/bin/python9": (1, "", "boom")}, tools={"python9": "/usr/bin/python9"})
    assert venv_python_version(host, "", "python9") == (None, None)


def test_stack_plan_judges_the_wheelhouse_with_the_venvs_python_and_the_hosts_glibc(tmp_path):
    """The job: the host's Ansible Python is 3.12, the venv is made with a python3.13 (pytorch_venv_python): a cp312
    torch is refused naming 3.13, a cp313 one passes; a manylinux_2_39 torch is refused on a host whose glibc is
    2.35."""
    from test_stack_plan_job import HOST, Mirror, params  # the same stand-in host and arguments  # noqa: E402
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan.stack_plan_job import StackPlanJob

    def run(filename, glibc="2.39"):
        house = tmp_path / filename
        house.mkdir()
        wheel(house, filename)
        base = params()
        settings_ = dict(base["settings"], torch_source="wheelhouse", torch_version="2.11.0",
                         venv=str(tmp_path / "no-venv"), venv_python="python3.13")
        host = FakeSystem(commands={"/usr/bin/python3.13": (0, "3.13\n", "")},
                          tools={"python3.13": "/usr/bin/python3.13"})
        res = StackPlanJob(params(settings=settings_, host=dict(HOST, glibc=glibc), probe_sources=False,
                                  sources=dict(base["sources"], wheelhouse=str(house))), host, opener=Mirror()).run()
        return [p["message"] for p in res["problems"] if p["check"] == "wheelhouse"]

    assert run("torch-2.11.0-cp313-cp313-manylinux_2_28_aarch64.whl") == []
    found = run("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert len(found) == 1 and found[0].endswith("is for Python cp312 (ABI cp312), the venv's Python is 3.13"), found
    found = run("torch-2.11.0-cp313-cp313-manylinux_2_39_aarch64.whl", glibc="2.35")
    assert len(found) == 1 and found[0].endswith("(glibc 2.39 or newer), this host's glibc is 2.35"), found
