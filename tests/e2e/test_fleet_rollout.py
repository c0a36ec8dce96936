"""Generations and the verify-gated rollout, for real, on a fleet of four container hosts in two classes.

Four containers from the test bed's amd64 image (molecule/shared/build-images.sh), with no network at
all (`--network none`), reached through the podman connection: a1, a2 are DGX Spark stand-ins (a fake
nvidia-smi reporting a GB10), b1, b2 GH200 stand-ins, so two platform classes with a1 and b1 as their
builders. Components pytorch and torch_domains, built on the builders from the fixture sources
(tests/fixtures, mounted read-only); pip there has no index, only `wheel` beside it (/srv/deps: the host's
/etc/pip.conf, and pytorch_extra_env for the build, which reads no pip configuration of the host).
The wheelhouse with its generations is on the controller (this machine).

1. Generation 1: torch 2.10.0 with torchvision 0.25.0 and torchaudio 2.10.0, everywhere.
2. Generation 2: torch 2.12.0 (torchvision 0.27.0, torchaudio 2.11.0); class b's torchvision is built
   so that it installs but does not import (an extension that cannot load). Class a upgrades; b1,
   class b's first batch, fails the gate and goes back to generation 1 (its wheels' sha256 equal
   generation 1's, the gate passes again); the budget of one failure is spent, so b2 is held.
3. The fault fixed: class b's generation 3 rolls out, then a rerun changes nothing.
   Before it, a2 is left as a host killed halfway through an install: found partial, and repaired.
4. Faults: a rollback to a pruned generation, or to one whose wheel is corrupt, is refused before any
   host changes; a host never upgraded is left alone; a rollback on purpose; `sparkforge status`
   through the CLI all along.
5. With nvcc on this machine (/usr/local/cuda, mounted read-only): component ml_packages with a GPU
   package, the fixture sdist tests/fixtures/ml_packages/cudaext (its setup.py's interface is
   causal-conv1d's: force-build flag, hard-coded -gencode pairs the manifest's kind of fix removes,
   a real nvcc-built shared object). Each class's builder builds it once against its torch (sm_121 for
   class a, sm_90 for class b), audits it and publishes it with torch's wheels; the other host installs
   those bytes and builds nothing. A new torch builds it again, an unchanged one reuses it. (A wheel the
   builder's audit refuses is never published: the module's test, test_ml_packages_module.py's
   test_gpu_package_built_once_per_class_published_and_installed_on_another_host.)

The commands are the guide's (docs/guides/upgrading-a-fleet.md, read by tests/readme.py), run as written from a
stand-in checkout (this repository's playbooks, collections and ansible.cfg; .venv is this Python's
environment) whose `inventory/` holds the fleet; a rollback's `[--to G] [-l LIMIT]` are filled in.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import uuid

import pytest
import yaml

import readme

from helpers import (COLLECTIONS, CONNECTION, GB10, GH200, REPO, cudaext_entry, fake_smi, image_present, pinned_wheel,
                     remove_containers, start_container, user_checkout, user_shell)

sys.path.insert(0, COLLECTIONS)
from ansible_collections.sparkforge.stack.plugins.module_utils.fleet import generations as gen  # noqa: E402

BIN = os.path.dirname(sys.executable)
FIXTURES = os.path.join(REPO, "tests", "fixtures")
PREFIX = "/opt/sparkforge"
# Inventory order a1, b1, a2, b2 with batches of two: each class has one host in each batch, so
# class b's first batch is b1 alone and b2 comes in the second (two batches, not four).
GPUS = {"a1": GB10, "b1": GH200, "a2": GB10, "b2": GH200}
# The GPU package's build needs nvcc: this machine's CUDA toolkit, mounted read-only into the hosts.
CUDA = os.path.realpath("/usr/local/cuda")
HEAVY = os.access(os.path.join(CUDA, "bin", "nvcc"), os.X_OK)
CUDAEXT = "sparkforge-cudaext"
# The fixture's interface in the manifest's gpu_build form (helpers.cudaext_entry, as tests/integration/test_ml_packages_module.py).
CUDAEXT_ENTRY = cudaext_entry(optional=False, cuda_home="/usr/local/cuda")
BROKEN = "libtorchvision_fixture.so: undefined symbol: _ZN3c104impl8GPUTrace (built on purpose)"


pytestmark = pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing")


def wheel_dir(root):
    """A directory holding the pinned `wheel` for the builders' build venvs."""
    deps = root / "deps"
    deps.mkdir()
    shutil.copy(pinned_wheel(), str(deps))
    return deps


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollout")
    repos = root / "repos"
    subprocess.run([sys.executable, os.path.join(FIXTURES, "pytorch", "make_repo.py"), str(repos / "pytorch")],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(FIXTURES, "torch_domains", "make_repos.py"), str(repos),
                    "torchvision=0.25.0,0.27.0", "torchaudio=2.10.0,2.11.0"], check=True, stdout=subprocess.DEVNULL)
    deps = wheel_dir(root)
    heavy = root / "heavy"
    heavy.mkdir()
    if HEAVY:
        sys.path.insert(0, os.path.join(FIXTURES, "ml_packages"))
        from fixture_index import sdist
        sdist(os.path.join(FIXTURES, "ml_packages", "cudaext"), CUDAEXT, "1.0", str(heavy))
    pip_conf = root / "pip.conf"
    pip_conf.write_text("[global]\nno-index = true\nfind-links = /srv/deps\ndisable-pip-version-check = true\n")
    tag = uuid.uuid4().hex[:6]
    names = dict((h, "sparkforge-rollout-%s-%s" % (tag, h)) for h in GPUS)
    # The guide's checkout: `ansible-playbook playbooks/spark.yml -i inventory` and `.venv/bin/sparkforge`
    # run from it as written.
    checkout = user_checkout(root)
    hosts = {}
    try:
        for host, name in names.items():
            smi = root / ("gpu-" + host)
            smi.mkdir()
            hosts[host] = {"ansible_connection": CONNECTION, "ansible_host": name,
                           "ansible_python_interpreter": "/usr/bin/python3",
                           "preflight_nvidia_smi": fake_smi(str(smi), host, GPUS[host], python="/usr/bin/python3",
                                                            seen_at="/opt/fake-gpu")}
            # The fixture repositories at the same path as here, so their file:// URLs hold on both sides.
            start_container(name, network="none", volumes=[
                "%s:%s:ro" % (repos, repos), "%s:/srv/deps:ro" % deps, "%s:/etc/pip.conf:ro" % pip_conf,
                "%s:/opt/fake-gpu:ro" % smi, "%s:/srv/heavy:ro" % heavy]
                + (["%s:/usr/local/cuda:ro" % CUDA] if HEAVY else []))
        group = {
            "sparkforge_components": ["pytorch", "torch_domains"],
            "sparkforge_torch_version": "2.10.0",
            "sparkforge_prefix": PREFIX,
            "sparkforge_fleet_wheelhouse": str(root / "wheelhouse"),
            "sparkforge_fleet_report_dir": str(root / "reports"),
            "sparkforge_fleet_generations_keep": 2,
            "preflight_allow_x86_64": True,
            "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]},
                                                  {"distribution": "Ubuntu", "versions": ["22.04", "24.04"]}],
            "preflight_min_ram_gib": 1, "preflight_min_ram_gib_source_build": 1,
            "preflight_min_disk_gib": 1, "preflight_min_disk_gib_source_build": 1,
            # The hosts have no network; every source is a mounted directory (the preflight probe is
            # tested in test_sources_preflight.py).
            "sparkforge_probe_sources": False,
            "pytorch_repo": "file://%s" % (repos / "pytorch"),
            "pytorch_features": {"cuda": False},
            "pytorch_jobs": 1,
            # The build's own pip settings (its build requirements from /srv/deps): the host's /etc/pip.conf and
            # PIP_* never reach the venv's pip (_common/run_env.py), the plan's variables are the one way.
            "pytorch_extra_env": {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/srv/deps"},
            "pytorch_build_poll": 1,
            "pytorch_build_poll_max": 2,
            "torch_domains_repos": {"torchvision": "file://%s" % (repos / "torchvision"),
                                    "torchaudio": "file://%s" % (repos / "torchaudio")},
            "torch_domains_jobs": 1,
        }
        if HEAVY:
            group.update({
                "sparkforge_components": ["pytorch", "torch_domains", "ml_packages"],
                "ml_packages_profile": "", "ml_packages_packages": [CUDAEXT],
                "ml_packages_extra_matrix": {CUDAEXT: CUDAEXT_ENTRY}, "ml_packages_install_prereqs": False,
                "ml_packages_no_index": True, "ml_packages_find_links": ["/srv/heavy"],
            })
        inventory = os.path.join(checkout, "inventory", "hosts.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}, handle, sort_keys=False)
        yield {"root": root, "inventory": inventory, "names": names, "checkout": checkout}
    finally:
        remove_containers(names.values())


def readme_line(starts, **fill):
    """The guide "Upgrading a fleet"'s line starting with ``starts``, its comment dropped and each
    ``[--opt VALUE]`` replaced by ``fill[opt]`` (or left out)."""
    line = readme.command("upgrading-a-fleet.md", starts).split("  #")[0].strip()
    for opt in re.findall(r"\[(-[-\w]+) \w+\]", line):
        value = fill.get(opt.lstrip("-"))
        line = re.sub(r"\[%s \w+\]" % re.escape(opt), "%s %s" % (opt, value) if value else "", line)
    return " ".join(line.split())


def on(fleet, host, *cmd, stdin=None):
    """Run ``cmd`` in ``host``'s container."""
    return subprocess.run(["podman", "exec", "-i", fleet["names"][host]] + list(cmd), input=stdin,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                          check=False)


def read_json(fleet, host, path):
    proc = on(fleet, host, "cat", path)
    assert proc.returncode == 0, proc.stdout
    return json.loads(proc.stdout)


def shell(fleet, line, timeout=900):
    return user_shell(fleet["checkout"], line, timeout=timeout)


def play(fleet):
    """The guide's upgrade command, as written."""
    proc = shell(fleet, readme_line("ansible-playbook playbooks/spark.yml"))
    recap = {m.group(1): {"changed": int(m.group(2)), "failed": int(m.group(3))} for m in re.finditer(
        r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout, re.M)}
    fleet["runs"] = fleet.get("runs", 0) + 1  # each run's output stays beside the fleet, for a person
    (fleet["root"] / ("run-%02d.log" % fleet["runs"])).write_text(proc.stdout)
    return proc, recap


def rollback(fleet, **fill):
    """The guide's rollback command with its options filled in, and --json: (exit code, result)."""
    proc = shell(fleet, readme_line(".venv/bin/sparkforge rollback", **fill) + " --json -q")
    (fleet["root"] / ("rollback-%s.log" % uuid.uuid4().hex[:4])).write_text(proc.stdout)
    return proc.returncode, json.loads(proc.stdout[proc.stdout.index("{"):])


def provision(fleet):
    proc, recap = play(fleet)
    with open(fleet["root"] / "reports" / "fleet-history.jsonl") as handle:
        last = json.loads(handle.read().splitlines()[-1])["hosts"]
    return proc, recap, last


def set_vars(fleet, hosts, **values):
    with open(fleet["inventory"]) as handle:
        data = yaml.safe_load(handle)
    for host in hosts:
        data["all"]["hosts"][host].update(values)
        for name, value in values.items():
            if value is None:
                del data["all"]["hosts"][host][name]
    with open(fleet["inventory"], "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def set_group(fleet, **values):
    with open(fleet["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"].update(values)
    with open(fleet["inventory"], "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def record(fleet, host):
    return read_json(fleet, host, PREFIX + "/generation.json")


def venv_wheels(fleet, host):
    return read_json(fleet, host, PREFIX + "/venv/sparkforge-wheels.json")


def generations(fleet, lineage):
    return gen.load(str(fleet["root"] / "wheelhouse"), lineage)


def imports(fleet, host):
    return on(fleet, host, PREFIX + "/venv/bin/python", "-c",
              "import torch, torchvision, torchaudio; print(torch.__version__, torchvision.__version__)")


def status(fleet):
    """The guide's status command, as written, and with --json -q: (exit code, result, its output)."""
    line = readme_line(".venv/bin/sparkforge status")
    proc = shell(fleet, line + " --json -q", timeout=600)
    return proc.returncode, json.loads(proc.stdout[proc.stdout.index("{"):]), proc.stdout


def heavy_entry(fleet, lineage, index=-1):
    """The GPU package's entry in a generation of the lineage (the newest by default)."""
    return [w for w in generations(fleet, lineage)["generations"][index]["wheels"] if w["name"] == CUDAEXT][0]


def heavy_builds(fleet, host):
    """How many times the GPU package was compiled on ``host`` (its class-build log's wheel phases)."""
    log = "%s/reports/ml_packages_logs/%s-class-build.log" % (PREFIX, CUDAEXT)
    proc = on(fleet, host, "sh", "-c", "cat %s 2>/dev/null" % log)
    return proc.stdout.count("=== phase %s-wheel" % CUDAEXT)


def test_generations_gate_rollback_and_status(fleet):
    # 1. Generation 1 everywhere.
    proc, recap, s1 = provision(fleet)
    assert proc.returncode == 0, proc.stdout[-8000:]
    cls = {h: s1[h]["lineage"] for h in GPUS}
    assert cls["a1"] == cls["a2"] != cls["b1"] == cls["b2"]
    assert s1["a1"]["class"] != cls["a1"] and s1["a1"]["class"].rsplit("-", 1)[0] == cls["a1"].rsplit("-", 1)[0]
    assert {h: (s1[h]["state"], s1[h]["generation"]) for h in GPUS} == dict((h, ("provisioned", 1)) for h in GPUS)
    assert s1["a2"]["how"] == "first install (generation 1)"
    for host in GPUS:
        assert record(fleet, host)["state"] == "verified" and record(fleet, host)["generation"] == 1
    gen_b = generations(fleet, cls["b1"])
    assert [g["number"] for g in gen_b["generations"]] == [1]
    assert gen_b["generations"][0]["verify"]["state"] == "passed" and gen_b["generations"][0]["builder"] == "b1"
    assert gen_b["generations"][0]["inputs"]["torch"] == "2.10.0"
    torch_entry = [w for w in gen_b["generations"][0]["wheels"] if w["name"] == "torch"][0]
    assert torch_entry["manifest"]["torch_version"] == "2.10.0" and torch_entry["manifest"]["reproducible"]
    g1_b = dict((w["name"], w["sha256"]) for w in gen_b["generations"][0]["wheels"])
    if HEAVY:
        # 5. Built once per class on its builder, for the class's GPU, audited, published with its inputs.
        # Class a's GB10 (12.1) builds with torch 2.10's arch list, where the mem-eff trap swapped 12.1 for
        # 12.0: sm_120 SASS runs on sm_121 (same major), which the audit reads as compatible.
        for builder, member, arch, sass, verdicts in (("a1", "a2", "12.0", "sm_120", {"12.1": "compatible"}),
                                                      ("b1", "b2", "9.0", "sm_90", {"9.0": "native"})):
            entry = heavy_entry(fleet, cls[builder])
            manifest = entry["manifest"]
            assert manifest["arch_list"] == arch and manifest["fixes"][0]["replaced"] == 2, manifest
            assert manifest["depends_on"] == [w for w in generations(fleet, cls[builder])["generations"][-1]["wheels"]
                                              if w["name"] == "torch"][0]["sha256"]
            assert [(lib["sass"], lib["verdicts"]) for lib in manifest["audit"]["libraries"]] == [
                ([sass], verdicts)]
            assert venv_wheels(fleet, builder)[CUDAEXT] == venv_wheels(fleet, member)[CUDAEXT] == entry["sha256"]
            assert (heavy_builds(fleet, builder), heavy_builds(fleet, member)) == (1, 0)
            assert on(fleet, member, "test", "-e", PREFIX + "/wheels/heavy").returncode == 1
            report = read_json(fleet, member, PREFIX + "/reports/ml_packages.json")
            assert [(r["name"], r["state"]) for r in report["packages"]] == [(CUDAEXT, "installed")], report
        assert venv_wheels(fleet, "a1")[CUDAEXT] != venv_wheels(fleet, "b1")[CUDAEXT]

    # 2. Generation 2, with class b's torchvision broken on purpose.
    set_group(fleet, sparkforge_torch_version="2.12.0")
    set_vars(fleet, ["b1", "b2"], torch_domains_extra_env={"FIXTURE_IMPORT_ERROR": BROKEN})
    proc, recap, s2 = provision(fleet)
    assert proc.returncode == 2, proc.stdout[-8000:]
    assert (s2["a1"]["state"], s2["a1"]["generation"], s2["a1"]["how"]) == (
        "provisioned", 2, "upgrade from generation 1")
    assert (s2["a2"]["state"], s2["a2"]["generation"]) == ("provisioned", 2), s2["a2"]
    assert (s2["b1"]["state"], s2["b1"]["generation"]) == ("rolled_back", 1)
    assert "torchvision does not import: ImportError: %s" % BROKEN in s2["b1"]["error"]
    assert s2["b1"]["error"].endswith("rolled back to generation 1")
    assert s2["b2"]["state"] == "held" and "sparkforge_rollout_max_failures 1" in s2["b2"]["error"]
    assert recap["b1"]["failed"] == recap["b2"]["failed"] == 1 and recap["a1"]["failed"] == recap["a2"]["failed"] == 0
    # b1 holds generation 1's bytes again, and they import; b2 was not touched.
    assert venv_wheels(fleet, "b1") == g1_b == venv_wheels(fleet, "b2")
    assert imports(fleet, "b1").stdout.split() == ["2.10.0", "0.25.0"]
    rb = record(fleet, "b1")
    assert (rb["generation"], rb["state"]) == (1, "rolled_back")
    assert rb["how"].startswith("rolled back from generation 2: ")
    assert [(h["generation"], h["state"]) for h in rb["history"][-4:]] == [(2, "installed"), (2, "failed"),
                                                                          (1, "installing"), (1, "installed")]
    assert (record(fleet, "b2")["generation"], record(fleet, "b2")["state"]) == (1, "verified")
    gen_b = generations(fleet, cls["b1"])
    assert [(g["number"], g["verify"]["state"]) for g in gen_b["generations"]] == [(1, "passed"), (2, "failed")]
    assert BROKEN in gen_b["generations"][1]["verify"]["detail"]
    assert [(g["number"], g["verify"]["state"]) for g in generations(fleet, cls["a1"])["generations"]] == [
        (1, "passed"), (2, "passed")]
    if HEAVY:
        # A new torch is a new input: each builder built the GPU package again.
        assert heavy_entry(fleet, cls["a1"])["cache_key"] != heavy_entry(fleet, cls["a1"], 0)["cache_key"]
        assert (heavy_builds(fleet, "a1"), heavy_builds(fleet, "b1"), heavy_builds(fleet, "a2")) == (2, 2, 0)

    # A host killed halfway through an install: its record says installing, pip had removed torch.
    was = record(fleet, "a2")
    killed = gen.host_transition(was, {"lineage": was["lineage"], "class": was["class"], "number": 2}, "installing",
                                 "upgrade from generation 1", "t")
    local = fleet["root"] / "a2-generation.json"
    gen.write_host(str(local), killed)
    assert on(fleet, "a2", "sh", "-c", "cat > %s/generation.json" % PREFIX, stdin=local.read_text()).returncode == 0
    assert on(fleet, "a2", "rm", PREFIX + "/venv/sparkforge-wheels.json").returncode == 0
    uninstall = on(fleet, "a2", PREFIX + "/venv/bin/python", "-m", "pip", "uninstall", "-y", "-q", "torch")
    assert uninstall.returncode == 0, uninstall.stdout

    rc, st, err = status(fleet)
    assert rc == 0, err
    verdicts = dict((row["host"], row["verdict"]) for row in st["generations"])
    assert verdicts == {"a1": "current", "a2": "partial: an install of generation 2 was interrupted",
                        "b1": "behind: generation 1, newest 2", "b2": "behind: generation 1, newest 2"}

    # 3. The fault fixed: class b's next generation rolls out, a2 is repaired; then nothing changes.
    set_vars(fleet, ["b1", "b2"], torch_domains_extra_env=None)
    proc, recap, s3 = provision(fleet)
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert {h: (s3[h]["state"], s3[h]["generation"]) for h in GPUS} == {
        "a1": ("provisioned", 2), "a2": ("provisioned", 2), "b1": ("provisioned", 3), "b2": ("provisioned", 3)}
    assert s3["b2"]["how"] == "upgrade from generation 1"
    assert s3["a2"]["how"] == "repair: the install of generation 2 was interrupted"
    assert record(fleet, "a2")["state"] == "verified" and imports(fleet, "a2").stdout.split()[0] == "2.12.0"
    assert recap["a1"]["changed"] == 0
    # keep=2: class b's generation 1 was pruned with the wheel directories only it used.
    gen_b = generations(fleet, cls["b1"])
    assert [g["number"] for g in gen_b["generations"]] == [2, 3] and gen_b["pruned"] == [1]
    if HEAVY:
        # Class b's torch did not change (only its torchvision): its GPU package was reused, not built.
        assert heavy_entry(fleet, cls["b1"])["sha256"] == heavy_entry(fleet, cls["b1"], 0)["sha256"]
        assert heavy_builds(fleet, "b1") == 2
        assert venv_wheels(fleet, "b2")[CUDAEXT] == heavy_entry(fleet, cls["b1"])["sha256"]
    proc, recap, s4 = provision(fleet)
    assert proc.returncode == 0, proc.stdout[-8000:]
    assert all(r["changed"] == 0 for r in recap.values()), recap
    assert {h: s4[h]["wheels"] for h in GPUS} == {h: s3[h]["wheels"] for h in GPUS}
    assert imports(fleet, "b2").stdout.split() == ["2.12.0", "0.27.0"]

    # 4a. Rollbacks refused before any host changes: to a pruned generation; to one with a corrupt wheel.
    before = {h: (record(fleet, h), venv_wheels(fleet, h)) for h in GPUS}
    rc, result = rollback(fleet, to="1", l="b1,b2")
    assert rc == 2 and "generation 1 of %s was pruned" % cls["b1"] in json.dumps(result), result
    entry = [w for w in generations(fleet, cls["a1"])["generations"][0]["wheels"] if w["name"] == "torchaudio"][0]
    path = fleet["root"] / "wheelhouse" / generations(fleet, cls["a1"])["generations"][0]["class"] / entry["dir"] \
        / entry["file"]
    good = path.read_bytes()
    path.write_bytes(good + b"corrupt")
    try:
        rc, result = rollback(fleet, l="a1,a2")
    finally:
        path.write_bytes(good)
    text = json.dumps(result)
    assert rc == 2 and "generation 1 of %s cannot be installed" % cls["a1"] in text, result
    assert "the generation records %s" % hashlib.sha256(good).hexdigest() in text
    assert {h: (record(fleet, h), venv_wheels(fleet, h)) for h in GPUS} == before

    # 4b. A rollback on purpose (a1 to its previous generation); a host never upgraded is left alone.
    # n1: a host never upgraded through generations (a2's container, another prefix), in the inventory
    # for this rollback only.
    with open(fleet["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["hosts"]["n1"] = dict(data["all"]["hosts"]["a2"], sparkforge_prefix="/opt/n1")
    with open(fleet["inventory"], "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    try:
        rc, result = rollback(fleet, l="a1,n1")
    finally:
        del data["all"]["hosts"]["n1"]
        with open(fleet["inventory"], "w") as handle:
            yaml.safe_dump(data, handle, sort_keys=False)
    assert rc == 0, result
    assert result["hosts"]["n1"]["changed"] == 0 and on(fleet, "a2", "test", "-e", "/opt/n1").returncode == 1
    assert result["hosts"]["n1"]["failed"] == 0 and not result["hosts"]["n1"]["failures"], result
    ra = record(fleet, "a1")
    assert (ra["generation"], ra["state"], ra["how"]) == (1, "rolled_back", "rolled back on request from generation 2")
    assert imports(fleet, "a1").stdout.split() == ["2.10.0", "0.25.0"]
    rc, st, err = status(fleet)
    rows = dict((r["host"], r) for r in st["generations"])
    assert rows["a1"]["verdict"] == "behind: generation 1, newest 2" and rows["a1"]["state"] == "rolled_back"
    assert [rows[h]["verdict"] for h in ("a2", "b1", "b2")] == ["current"] * 3
    # The status line as written prints the table.
    text = shell(fleet, readme_line(".venv/bin/sparkforge status"), timeout=600).stdout
    assert re.search(r"^a1\s+%s\s+1\s+rolled_back\s+behind: generation 1, newest 2$" % re.escape(s1["a1"]["class"]),
                     text,
                     re.M), text

