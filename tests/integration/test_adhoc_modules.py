"""The fact-gathering modules run ad hoc (`ansible HOST -m ...`, what library/ is for), with no manifest role
variables: the controller-side action plugin supplies the manifest's table from its one file."""

import json
import re
import os
import subprocess
import sys

from tests.helpers import COLLECTIONS, GB10, GH200, REPO, fake_smi, load_manifest

BIN = os.path.dirname(sys.executable)


def adhoc(module, args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    proc = subprocess.run([os.path.join(BIN, "ansible"), "localhost", "-m", module, "-a", json.dumps(args)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_gpu_facts_runs_ad_hoc_and_classifies_with_the_manifests_table(tmp_path):
    platforms = load_manifest()["sparkforge_gpu_platforms"]
    for host, gpu, name in (("spark", GB10, "NVIDIA GB10"), ("gh", GH200, "NVIDIA GH200 480GB")):
        result = adhoc("sparkforge.stack.gpu_facts", {"nvidia_smi": fake_smi(str(tmp_path), host, gpu)})
        facts = result["ansible_facts"]["sparkforge"]
        assert [g["name"] for g in facts["gpus"]] == [name]
        # The class comes from the manifest's first matching row, the same rule the module documents.
        want = next(row["class"] for row in platforms.values() if re.search(row["match"], name, re.I))
        assert {g["platform_class"] for g in facts["gpus"]} == {want}
        assert result["changed"] is False
