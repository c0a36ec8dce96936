"""The three changes the guides describe, made as the guides say on a copy of the tree, then the suites the guides
name run there: a torch release (version-pins-and-releases.md, "Adding a release"), a GPU class (the same guide,
"Adding a GPU model") and a verify check (verify.md, "Adding a verify check").  The edits are read from the guides'
code blocks (a block after a line "Edit `<path>`, <where>:"), so the test breaks when a guide drifts from
what the change takes; the suites are the guide's own ``python -m pytest`` line.  Each change is tried on more than
the guide's example (another release, other GPU classes: a Thor-like sm_110, a GB300-like sm_103, an unnamed
12.x), the example's names swapped for the variant's."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import readme

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join("collections", "ansible_collections", "sparkforge", "stack")


EDIT = re.compile(r"^Edit `([^`]+)`, ([^\n]+):\n\n```\w+\n(.*?)^```", re.M | re.S)


def edits(text):
    """[(path under the collection, where, the block)] of a guide section: each block that a line
    "Edit `<path>`, <where>:" introduces."""
    return EDIT.findall(text)


def suites(line):
    """The guide's pytest line: (directory under the tree, argv)."""
    where, _, command = line.partition(" && ")
    assert where.startswith("cd ") and command.startswith("python -m pytest"), line
    return where[3:].strip(), command.split()[1:]


def copy_tree(tmp_path):
    """The tracked and untracked (not ignored) files of this checkout, as a new tree."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    dest = tmp_path / "tree"
    for name in filter(None, names):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source) and not os.path.islink(source):
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def run_suites(tree, line):
    where, argv = suites(line)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable] + argv, cwd=str(tree / where), env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, "the guide's suites fail after its edit:\n%s" % (done.stdout[-6000:] + done.stderr)


def top_level_block_end(lines, key_line):
    """The index of the first line after the top-level mapping that starts at ``key_line``."""
    for i in range(key_line + 1, len(lines)):
        if lines[i] and not lines[i][0].isspace() and not lines[i].startswith("#"):
            return i
    return len(lines)


def apply_edit(tree, path, where, block):
    target = tree / COLLECTION / path
    lines = target.read_text().split("\n")
    if where.startswith("a new first row of "):
        key = where[len("a new first row of "):].strip()
        at = lines.index(key + ":") + 1
        lines[at:at] = ["  " + line if line else line for line in block.rstrip("\n").split("\n")]
    elif where.startswith("a new last entry of "):
        key = where[len("a new last entry of "):].strip()
        end = top_level_block_end(lines, lines.index(key + ":"))
        while end > 0 and not lines[end - 1].strip():
            end -= 1
        lines[end:end] = ["  " + line if line else line for line in block.rstrip("\n").split("\n")]
    elif where.startswith("the class appended to good_for"):
        klass = re.search(r"good_for: \[.*, (\w+)\]", block).group(1)
        hits = [i for i, line in enumerate(lines) if re.match(r"^\s+good_for: \[.*\]\s*$", line)]
        assert hits, "no good_for list in %s" % path
        for i in hits:
            lines[i] = re.sub(r"\]\s*$", ", %s]" % klass, lines[i])
    elif where.startswith("a new group below the last @check group"):
        at = next(i for i, line in enumerate(lines) if re.match(r"^# -+ benchmarks", line))
        lines[at:at] = block.rstrip("\n").split("\n") + ["", ""]
    else:
        raise AssertionError("the guide's edit of %s says %r, which this test cannot make" % (path, where))
    target.write_text("\n".join(lines))


def swapped(text, pairs):
    for old, new in pairs:
        text = text.replace(old, new)
    return text


# (row key, product-name word, class, compute capability, the arch list the plan must give such a host)
GPU_CLASSES = [
    ("gb300", "GB300", "gb300", "10.3", "10.0"),
    ("thor2", "THOR2", "thor_next", "11.0", "11.0"),
    ("gb20", "GB20", "gb20", "12.7", "12.1"),
]

PLAN_A_HOST = textwrap.dedent("""
    import json, sys
    from ansible_collections.sparkforge.stack.plugins.module_utils.host.platforms import classify_gpu, platform_rows
    from ansible_collections.sparkforge.stack.plugins.module_utils.plan import preflight
    from ansible_collections.sparkforge.stack.tests.unit.utils.harness import load_manifest
    name, capability = sys.argv[1], sys.argv[2]
    manifest = load_manifest()
    klass = classify_gpu(name, platform_rows(manifest["sparkforge_gpu_platforms"]))
    sm = "sm_" + capability.replace(".", "")
    facts = {"gpus": [{"index": 0, "name": name, "compute_capability": capability, "sm": sm,
                       "driver_version": "580.95.05", "memory_mib": None, "uuid": "GPU-x", "platform_class": klass}],
             "compute_capabilities": [capability], "sm_archs": [sm], "platform_class": klass,
             "cpu": {"arch": "aarch64", "cores": 20, "sve2": True},
             "memory": {"total_mib": 122502, "available_mib": 120000}, "disk": {}, "gpu_error": None}
    plan = preflight.build_plan(facts, {"python_version": "3.12.3"}, manifest)
    print(json.dumps({"class": klass, "version": plan["torch"]["version"], "arch": plan["arch"]["list"],
                      "why": plan["arch"]["reason"]}))
""")


def plan_a_host(tree, name, capability):
    env = dict(os.environ, PYTHONPATH=str(tree / "collections"), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", PLAN_A_HOST, name, capability], cwd=str(tree), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("key, word, klass, capability, want", GPU_CLASSES, ids=[g[0] for g in GPU_CLASSES])
def test_a_gpu_class_added_as_the_guide_says_plans_its_hosts_and_the_suites_pass(tmp_path, key, word, klass,
                                                                                 capability, want):
    text = readme.section("version-pins-and-releases.md", "## Adding a GPU model")
    line = readme.command("version-pins-and-releases.md", "cd collections", heading="## Adding a GPU model")
    found = edits(text)
    assert found, "the guide lists no edit for a GPU class"
    tree = copy_tree(tmp_path)
    pairs = [("gb300:", "%s:" % key), ("class: gb300", "class: %s" % klass), (", gb300]", ", %s]" % klass),
             ("GB300", word)]
    for path, where, block in found:
        apply_edit(tree, path, where, swapped(block, pairs))
    got = plan_a_host(tree, "NVIDIA %s" % word, capability)
    assert got["class"] == klass, got
    assert got["arch"] == want, got
    run_suites(tree, line)


@pytest.mark.parametrize("version, vision", [("2.16.0", "0.30.0"), ("2.15.1", "0.29.3")])
def test_a_torch_release_added_as_the_guide_says_keeps_the_suites_green(tmp_path, version, vision):
    text = readme.section("version-pins-and-releases.md", "## Adding a release: `sparkforge versions`")
    line = readme.command("version-pins-and-releases.md", "cd collections",
                          heading="## Adding a release: `sparkforge versions`")
    found = edits(text)
    assert found, "the guide lists no edit for a release"
    tree = copy_tree(tmp_path)
    for path, where, block in found:
        apply_edit(tree, path, where, swapped(block, [('"2.16.0"', '"%s"' % version),
                                                       ('"0.30.0"', '"%s"' % vision)]))
    # The new release is what `latest` now means, and the plan of a DGX Spark picks it.
    got = plan_a_host(tree, "NVIDIA GB10", "12.1")
    assert got["version"] == version, got
    run_suites(tree, line)


@pytest.mark.parametrize("group", ["ecc", "ecc_mode"])
def test_a_verify_check_added_as_the_guide_says_is_a_group_and_the_suites_pass(tmp_path, group):
    text = readme.section("verify.md", "## Adding a verify check")
    line = readme.command("verify.md", "cd collections", heading="## Adding a verify check")
    found = edits(text)
    assert found, "the guide lists no edit for a verify check"
    tree = copy_tree(tmp_path)
    for path, where, block in found:
        apply_edit(tree, path, where, swapped(block, [('@check("ecc")', '@check("%s")' % group)]))
    env = dict(os.environ, PYTHONPATH=str(tree / "collections"), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [sys.executable, "-c", "from ansible_collections.sparkforge.stack.plugins.module_utils.verify import "
                               "torch_check_script as s; print(' '.join(s.check_groups()))"],
        cwd=str(tree), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == group
    run_suites(tree, line)
