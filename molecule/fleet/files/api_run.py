#!/usr/bin/env python3
"""Run playbooks/spark.yml through the Python API and write what it returns as JSON.

usage: api_run.py OUT.json EXTRAVARS_JSON INVENTORY [INVENTORY ...]

Calls sparkforge.api.provision (ansible-runner underneath) with a progress callback and writes
{"exit_code": ..., "result": RunResult.to_dict(), "events": [ProgressEvent as a dict, ...]}.
The scenario's verify.yml reads it; the exit status is always 0 when the JSON was written.
"""
import dataclasses
import json
import sys

from sparkforge import api


def main(out, extravars, inventories):
    events = []
    result = api.provision(inventories, extravars=json.loads(extravars), on_event=events.append, timeout=1800)
    with open(out, "w") as handle:
        json.dump({"exit_code": result.exit_code(), "result": result.to_dict(),
                   "events": [dataclasses.asdict(event) for event in events]}, handle, default=str)
    print("exit code %d, %d events, hosts: %s" % (result.exit_code(), len(events), result.summary()))


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
