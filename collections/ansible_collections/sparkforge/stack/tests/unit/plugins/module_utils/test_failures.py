# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""command_failure: the tool's reason, not "non-zero return code", in the failure message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils._common.failures import command_failure, output_tail

PIP_STDERR = (
    "Looking in links: /opt/sparkforge/wheels\n"
    "ERROR: Could not find a version that satisfies the requirement torch==2.11.0 (from versions: none)\n"
    "ERROR: No matching distribution found for torch==2.11.0\n"
)


def test_pip_failure_carries_pips_last_lines():
    result = {"rc": 1, "msg": "non-zero return code", "stderr": PIP_STDERR, "stdout": ""}
    text = command_failure(result, "pip install torch")
    assert text.startswith("pip install torch: exit 1: ")
    assert "No matching distribution found for torch==2.11.0" in text
    assert "non-zero return code" not in text


def test_stdout_when_stderr_is_empty_and_the_tail_is_bounded():
    out = "\n".join("line %d" % i for i in range(100)) + "\nCMake Error: CUDA_ARCHITECTURES is empty\n"
    text = command_failure({"rc": 2, "msg": "non-zero return code", "stdout": out, "stderr": ""}, "cmake")
    assert text.endswith("CMake Error: CUDA_ARCHITECTURES is empty")
    assert "line 10 " not in text and text.count(" | ") == 7


def test_a_modules_own_message_is_kept_and_not_repeated():
    result = {"msg": "No package matching 'libfoo' is available", "stderr": ""}
    assert command_failure(result) == "No package matching 'libfoo' is available"
    result = {"msg": "git clone failed: fatal: repository not found", "stderr": "fatal: repository not found"}
    assert command_failure(result, "clone") == "clone: git clone failed: fatal: repository not found"


def test_nothing_known():
    assert command_failure(None) == "failed"
    assert output_tail({"stderr": b"E: Unable to locate package x\n"}) == "E: Unable to locate package x"
    assert len(output_tail({"stderr": "x" * 5000})) <= 1503
