# -*- coding: utf-8 -*-
"""A stand-in for a job's ``system`` (module_utils/_common/job.py): a host whose commands answer from a
table, as a shell would (a command it does not know exits 127), and whose downloads come from a
table of URLs.  It records every command, download and warning so a test can say what the job
did to the host, and what it did not."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io


class FakeSystem:
    def __init__(self, commands=None, urls=None, tools=None):
        # commands: {tuple(argv) or argv[0]: (rc, out, err) or a function(argv) -> (rc, out, err)}
        self.commands = dict(commands or {})
        # urls: {url: bytes (a 200 answer) or an int (an HTTP status without a body)}
        self.urls = dict(urls or {})
        # tools: {name: path} found by which
        self.tools = dict(tools or {})
        self.ran = []
        # the environment each command was given (None: the module's own), in the order of ran
        self.envs = []
        self.fetched = []
        self.warnings = []

    def run(self, cmd, env=None, cwd=None):
        self.ran.append(list(cmd))
        self.envs.append(None if env is None else dict(env))
        answer = self.commands.get(tuple(cmd), self.commands.get(cmd[0]))
        if answer is None:
            return 127, "", "%s: command not found" % cmd[0]
        if callable(answer):
            return answer(list(cmd))
        return answer

    def fetch(self, url, timeout):
        self.fetched.append(url)
        answer = self.urls.get(url)
        if answer is None:
            return None, {"status": -1, "msg": "Name or service not known"}
        if isinstance(answer, int):
            return None, {"status": answer, "msg": "Not Found" if answer == 404 else "Error"}
        return io.BytesIO(answer), {"status": 200}

    def warn(self, msg):
        self.warnings.append(msg)

    def which(self, name, opt_dirs=()):
        return self.tools.get(name)

    def commands_run(self, name):
        """The commands run whose program is ``name``."""
        return [cmd for cmd in self.ran if cmd[0] == name]
