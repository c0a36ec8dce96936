# -*- coding: utf-8 -*-
"""module_utils/_common/job.py: the one error with its output tail, and LocalSystem, the seam on this
machine (real processes): a missing program answers as a shell does, so jobs probing for tools
see the same answer through it, AnsibleSystem and the unit tests' stand-in."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkforge.stack.plugins.module_utils.build import build_common
from ansible_collections.sparkforge.stack.plugins.module_utils._common.job import (
    TAIL_CHARS,
    JobError,
    LocalSystem,
    output_tail,
)


def test_a_build_failure_is_the_one_error():
    # One name for it: the older aliases (BuildError, JobFailed) are gone.
    assert not hasattr(build_common, "BuildError") and not hasattr(build_common, "JobFailed")
    failed = build_common.BuildFailed("build", 2, "/w/build.log", "ninja: build stopped: subcommand failed.")
    assert isinstance(failed, JobError) and failed.tail == "ninja: build stopped: subcommand failed."
    assert failed.msg.startswith("phase 'build' failed with exit code 2; full log: /w/build.log")


def test_fail_args_carry_the_message_the_fields_and_the_tail():
    exc = JobError("dpkg -i x.deb failed (exit 1): broken", tail="broken", cmd=["dpkg", "-i", "x.deb"])
    assert exc.fail_args() == {"msg": "dpkg -i x.deb failed (exit 1): broken", "cmd": ["dpkg", "-i", "x.deb"],
                               "output_tail": "broken"}
    # A job that reports the tail under its own name keeps it (triton's log_tail); no tail, no key.
    assert JobError("refused").fail_args() == {"msg": "refused"}
    assert JobError("m", tail="t", output_tail="own").fail_args()["output_tail"] == "own"


def test_the_tail_is_the_end_of_stderr_else_stdout():
    assert output_tail("out\n", "  err\n") == "err"
    assert output_tail("out\n", "  \n") == "out"
    long_err = "x" * TAIL_CHARS + "the reason"
    assert output_tail("", long_err) == long_err[-TAIL_CHARS:] and output_tail("", long_err).endswith("the reason")


def test_local_system_runs_real_processes():
    system = LocalSystem()
    assert system.run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, "out\n", "err\n")
    assert system.run(["sh", "-c", "echo $SPARKFORGE_T; pwd"], env={"SPARKFORGE_T": "v"}, cwd="/") == (0, "v\n/\n", "")
    rc, out, err = system.run(["/nonexistent/sparkforge-no-such-tool", "--version"])
    assert rc == 127 and out == "" and "sparkforge-no-such-tool" in err
    assert system.which("sh") and system.which("sparkforge-no-such-tool") is None
    system.warn("a warning")
    assert system.warnings == ["a warning"]
