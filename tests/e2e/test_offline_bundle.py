"""The offline bundle, for real: made here, used by container hosts that have no network at all.

The "network" is this machine's stand-ins, reached through file:// URLs that exist only here: the
stand-in NVIDIA server's tree (tests/fixtures/nvidia_repo: signed flat CUDA repository, cuda-keyring,
cuSPARSELt local-repo installers, all real .debs), a PEP 503 index of torch, torchvision, torchaudio
and a dependency of torch (tests/fixtures/pytorch/wheel_index.py), the fixture git repositories of
PyTorch, torchvision and torchaudio, and the builders' package index (real `wheel` and setuptools).
Two hosts, containers from the test bed's amd64 image with `--network none`, reached through the
podman connection, each with a fake nvidia-smi; components cuda_libs, cusparselt, pytorch and
torch_domains, the CUDA libraries asked for (sparkforge_dev_libraries):
  h1, a GB10: torch from the index;
  h2, a GH200: torch and the domain libraries built from git (its class's builder).

1. Without a bundle, preflight stops both hosts with the sources table (every source unreachable),
   and nothing on them changed (a filesystem snapshot).
2. `sparkforge bundle -i inventory/site.yml --out DIR` makes the bundle (the line of both guides, air-gapped
   sites and the CLI's); a rerun through
   `playbooks/bundle.yml` fetches nothing.
3. Bundles that must be refused, each a preflight stop on h1 that names the item, nothing changed: an
   item missing, a file whose sha256 differs, a bundle made for another Python.
4. With the bundle, the whole playbook converges on both (apt from the bundle's copy of the signed
   repository, cuSPARSELt's installer, pip from the bundle's wheels, the builds from its git mirrors
   and its build packages) and a rerun on h2 (the builder) changes nothing.
Submodules through the mirrors are proven in test_offline_bundle_parts.py.

The commands are the guide's (docs/guides/air-gapped-sites.md), run as written from a stand-in checkout whose
`inventory/site.yml` is the site, with the bundle directory in place of `/srv/sparkforge-bundle`.
"""

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
from helpers import (CONNECTION, GB10, GH200, REPO, fake_smi, image_present, pinned_wheel, remove_containers,
                     start_container, user_checkout, user_shell)

sys.path.insert(0, os.path.join(REPO, "tests", "fixtures", "nvidia_repo"))
import build_repo  # noqa: E402
import testbed  # noqa: E402

BIN = os.path.dirname(sys.executable)
FIXTURES = os.path.join(REPO, "tests", "fixtures")
WHEELS = os.path.join(FIXTURES, "pytorch", "wheel_index.py")
HOST_BUNDLE = "/opt/sparkforge/bundle"

pytestmark = pytest.mark.skipif(not image_present(), reason="podman or the test bed's amd64 image missing")


def torch_index(root):
    """torch 2.10.0 (needing sparkforge-dep) and its domain libraries, as a PEP 503 index; file:// URL."""
    wheels = root / "wheels"
    for args in (["torch", "2.10.0", "sparkforge-dep>=1"], ["sparkforge-dep", "1.0"],
                 ["torchvision", "0.25.0", "torch==2.10.0"], ["torchaudio", "2.10.0", "torch==2.10.0"],
                 ["torch", "2.11.0"]):  # a release the plan does not want: not bundled
        subprocess.run([sys.executable, WHEELS, "marker", str(wheels)] + args, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, WHEELS, "index", str(root / "index")] + sorted(str(p) for p in wheels.iterdir()),
                   check=True, stdout=subprocess.DEVNULL)
    return "file://%s/simple" % (root / "index")


def build_index(root):
    """The builders' package index (a site's mirror): the pinned `wheel` and the setuptools of Python's
    ensurepip, real wheels; file:// URL."""
    import ensurepip
    bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
    setuptools = [os.path.join(bundled, f) for f in os.listdir(bundled) if f.startswith("setuptools-")]
    subprocess.run([sys.executable, WHEELS, "index", str(root / "build-index"), pinned_wheel()] + setuptools,
                   check=True, stdout=subprocess.DEVNULL)
    return "file://%s/simple" % (root / "build-index")


HOSTS = ("h1", "h2")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("offline")
    cache = build_repo.build()
    with open(os.path.join(cache, "manifest.json")) as handle:
        stand_in = json.load(handle)
    tree = os.path.join(cache, "tree")
    installer = stand_in["cusparselt"]["0.8.1"]["debs"]["amd64"]
    repos = root / "repos"
    subprocess.run([sys.executable, os.path.join(FIXTURES, "pytorch", "make_repo.py"), str(repos / "pytorch")],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(FIXTURES, "torch_domains", "make_repos.py"), str(repos)],
                   check=True, stdout=subprocess.DEVNULL)
    names = dict((h, "sparkforge-offline-%s-%s" % (uuid.uuid4().hex[:6], h)) for h in HOSTS)
    hosts = {}
    for host, gpu in (("h1", GB10), ("h2", GH200)):
        smi = root / ("gpu-" + host)
        smi.mkdir()
        hosts[host] = {"ansible_connection": CONNECTION, "ansible_host": names[host],
                       "ansible_python_interpreter": "/usr/bin/python3",
                       "preflight_nvidia_smi": fake_smi(str(smi), host, gpu, python="/usr/bin/python3",
                                                        seen_at="/opt/fake-gpu")}
    # h1 installs torch from the index; h2 builds it and the domain libraries from git.
    hosts["h1"]["sparkforge_torch_source"] = "index"
    hosts["h2"]["sparkforge_torch_source"] = "source"
    group = {
        "sparkforge_components": ["cuda_libs", "cusparselt", "pytorch", "torch_domains"],
        "sparkforge_torch_version": "2.10.0",
        "sparkforge_torch_index_url": torch_index(root),
        "sparkforge_dev_libraries": "always",
        # The stand-in repositories are NVIDIA's ubuntu2404 ones; the test bed runs Debian 12.
        "sparkforge_cuda_distro_map": {"Debian-12": "ubuntu2404"},
        "cuda_libs_repo_url": "file://%s/compute/cuda/repos" % tree,
        "cuda_libs_install_build_prereqs": False,
        "cusparselt_base_url": "file://%s/compute/cusparselt/{version}/local_installers/" % tree,
        "sparkforge_cusparselt_sha256": {"0.8.1": {"ubuntu2404": {"amd64": installer["sha256"]}}},
        # The stand-in keyring is not NVIDIA's (the manifest's pin): pinned as a site pins its mirror's.
        "sparkforge_cuda_keyring_sha256": stand_in["cuda_keyring"]["ubuntu2404/x86_64"],
        "pytorch_repo": "file://%s" % (repos / "pytorch"),
        "torch_domains_repos": {"torchvision": "file://%s" % (repos / "torchvision"),
                                "torchaudio": "file://%s" % (repos / "torchaudio")},
        "sparkforge_fleet_pip_env": {"PIP_INDEX_URL": build_index(root)},
        # The fixture torch declares no dependencies; a real one needs sparkforge_bundle_build_wheels' list.
        "sparkforge_bundle_build_wheels": [],
        "pytorch_features": {"cuda": False},
        "pytorch_jobs": 1, "pytorch_build_poll": 1, "pytorch_build_poll_max": 2, "torch_domains_jobs": 1,
        "sparkforge_fleet_wheelhouse": str(root / "wheelhouse"),
        "sparkforge_fleet_report_dir": str(root / "reports"),
        "preflight_allow_x86_64": True,
        "preflight_supported_distributions": [{"distribution": "Debian", "versions": ["12"]}],
        "preflight_min_ram_gib": 1, "preflight_min_ram_gib_source_build": 1,
        "preflight_min_disk_gib": 1, "preflight_min_disk_gib_source_build": 1,
    }
    # The guide's checkout, where its commands run as written; the site's inventory is inventory/site.yml.
    checkout = user_checkout(root)
    inventory = os.path.join(checkout, "inventory", "site.yml")
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts, "vars": group}}, handle, sort_keys=False)
    try:
        for host in HOSTS:
            start_container(names[host], network="none", volumes=["%s:/opt/fake-gpu:ro" % (root / ("gpu-" + host))])
        yield {"root": root, "inventory": inventory, "names": names, "tree": tree, "checkout": checkout}
    finally:
        remove_containers(names.values())


def recap_of(proc):
    return dict((m.group(1), (int(m.group(2)), int(m.group(3)))) for m in re.finditer(
        r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout, re.M))


def bundle_lines(out):
    """The guide "Air-gapped sites", step 1's two commands, the bundle directory ``out`` for the guide's."""
    lines = readme.commands("air-gapped-sites.md")
    assert len(lines) == 2 and lines[1].startswith("# or: "), lines
    return [line.replace("# or: ", "").replace("/srv/sparkforge-bundle", out) for line in lines]


def spark(site, bundle=None, limit=None):
    """Step 3 as the guide has it: `sparkforge_bundle` set in the inventory (or not), then
    `ansible-playbook playbooks/spark.yml -i inventory/site.yml` in the checkout (with ``limit``: `-l LIMIT`
    added)."""
    with open(site["inventory"]) as handle:
        data = yaml.safe_load(handle)
    data["all"]["vars"].pop("sparkforge_bundle", None)
    if bundle:
        data["all"]["vars"]["sparkforge_bundle"] = bundle
    with open(site["inventory"], "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    line = "ansible-playbook playbooks/spark.yml -i inventory/site.yml"
    assert "run `%s` as usual" % line in " ".join(readme.section("air-gapped-sites.md").split())
    proc = user_shell(site["checkout"], line + (" -l " + limit if limit else ""))
    recap = dict((m.group(1), (int(m.group(2)), int(m.group(3)))) for m in re.finditer(
        r"^(h\d)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", proc.stdout, re.M))
    site["runs"] = site.get("runs", 0) + 1  # each run's output stays beside the test's files, for a person
    (site["root"] / ("run-%02d.log" % site["runs"])).write_text(proc.stdout)
    return proc, recap


def on(site, host, script):
    return subprocess.run(["podman", "exec", site["names"][host], "bash", "-c", script], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)


def snapshot(site, host):
    """The host's files and directories (tests/testbed.py's snapshot: the kernel's and the connection's scratch
    space left out)."""
    return testbed.fs_snapshot(site["names"][host])


def bad_copy(site, good, name, edit):
    """A copy of the bundle, changed by ``edit(directory, manifest)``; the manifest is written back."""
    dest = site["root"] / name
    shutil.copytree(good, str(dest))
    with open(dest / "manifest.json") as handle:
        manifest = json.load(handle)
    edit(dest, manifest)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return str(dest)


def test_offline_hosts_from_a_bundle(site):
    # 1. No bundle: preflight stops both hosts before anything changes, with the sources table.
    before = dict((h, snapshot(site, h)) for h in HOSTS)
    proc, recap = spark(site)
    (site["root"] / "no-bundle.log").write_text(proc.stdout)
    assert proc.returncode == 2 and recap == {"h1": (0, 1), "h2": (0, 1)}, proc.stdout[-6000:]
    # A pinned local file (the stand-in's keyring and cuSPARSELt installer) is hashed in preflight, so
    # a missing one is refused by name rather than probed.
    for source in ("cuda_libs: cuda-keyring", "cusparselt: cuSPARSELt installer"):
        assert re.search(r"%s is refused: \S+ does not exist" % re.escape(source), proc.stdout), source
    assert re.search(r"h\d\s+cusparselt: cuSPARSELt installer\s+file://", proc.stdout)  # its row in the table
    for source, variable in (("cuda_libs: CUDA apt repository", "cuda_libs_repo_url"),
                             ("pytorch: torch package index", "sparkforge_torch_index_url"),
                             ("pytorch: PyTorch source (git)", "pytorch_repo"),
                             ("torch_domains: torchvision source (git)", "torch_domains_repos"),
                             ("pytorch: Python packages for the builds (pip)", "sparkforge_fleet_pip_env")):
        assert "%s is unreachable: point %s" % (source, variable) in proc.stdout, source
        assert re.search(r"h\d\s+%s\s+file://" % re.escape(source), proc.stdout), source
    assert "Preflight found" in proc.stdout and "nothing was changed" in proc.stdout

    # 2. The bundle, made where the sources are: `sparkforge bundle`, the guide's line.
    bundle = str(site["root"] / "bundle")
    make, make_again = bundle_lines(bundle)
    # The CLI guide's line (docs/guides/api-cli-ee.md, "Python API and CLI") is this one, DIR filled in.
    cli = readme.command("api-cli-ee.md", ".venv/bin/sparkforge bundle", heading="## Python API and CLI")
    assert cli.split("  #")[0].strip().replace(" DIR", " " + bundle) == make, (cli, make)
    made = user_shell(site["checkout"], make)
    (site["root"] / "bundle.log").write_text(made.stdout)
    assert made.returncode == 0, made.stdout[-6000:]
    with open(os.path.join(bundle, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert [t["id"] for t in manifest["targets"]] == ["ubuntu2404-amd64-py3.11"]
    paths = set(i["path"] for i in manifest["items"])
    repo = "apt/ubuntu2404/x86_64/"
    # The signed index as published, the planned packages with their dependencies, nothing else.
    assert {repo + n for n in ("InRelease", "Release", "Release.gpg", "Packages", "Packages.gz")} <= paths
    debs = sorted(p[len(repo):] for p in paths if p.startswith(repo) and p.endswith(".deb"))
    assert debs == sorted(["cuda-keyring_1.1-1_all.deb", "cuda-toolkit-13-0-config-common_13.0.96-1_all.deb",
                           "cudnn9-cuda-13_9.13.0.50-1_amd64.deb", "libcublas-13-0_13.0.2.14-1_amd64.deb",
                           "libcublas-dev-13-0_13.0.2.14-1_amd64.deb", "libcudnn9-cuda-13_9.13.0.50-1_amd64.deb",
                           "libcudnn9-dev-cuda-13_9.13.0.50-1_amd64.deb",
                           "libcudnn9-headers-cuda-13_9.13.0.50-1_amd64.deb", "libnccl-dev_2.28.7-1+cuda13.0_amd64.deb",
                           "libnccl2_2.28.7-1+cuda13.0_amd64.deb"]), debs
    for name in ("InRelease", "Packages"):
        with open(os.path.join(site["tree"], "compute/cuda/repos/ubuntu2404/x86_64", name), "rb") as a, \
                open(os.path.join(bundle, repo + name), "rb") as b:
            assert a.read() == b.read(), "%s must be NVIDIA's file unchanged (apt checks its signature)" % name
    assert "cusparselt/cusparselt-local-repo-ubuntu2404-0.8.1_0.8.1-1_amd64.deb" in paths
    wheels = sorted(p.rsplit("/", 1)[1] for p in paths if p.startswith("wheels/cp311-x86_64/") and p.endswith(".whl"))
    setuptools = [w for w in wheels if w.startswith("setuptools-")]
    assert wheels == sorted(["sparkforge_dep-1.0-py3-none-any.whl", "torch-2.10.0-py3-none-any.whl",
                             "torchaudio-2.10.0-py3-none-any.whl", "torchvision-0.25.0-py3-none-any.whl",
                             "wheel-0.45.1-py3-none-any.whl"] + setuptools) and len(setuptools) == 1, wheels
    mirrors = [s for s in manifest["sources"] if s["kind"] == "git"]
    assert sorted((s["url"].rsplit("/", 1)[1], s["targets"]["any"]["ref"]) for s in mirrors) == [
        ("pytorch", "v2.10.0"), ("torchaudio", "v2.10.0"), ("torchvision", "v0.25.0")]
    for item in manifest["items"]:
        assert len(item["sha256"]) == 64 and item["size"] >= 0 and item["origin"], item
    # A rerun, the guide's other form (the playbook), fetches nothing.
    again = user_shell(site["checkout"], make_again)
    assert again.returncode == 0, again.stdout[-3000:]
    assert recap_of(again) and all(changed == 0 for changed, _ in recap_of(again).values()), again.stdout[-3000:]

    # 3. Bundles that must be refused by name, before anything changes.
    def drop_installer(dest, m):
        m["sources"] = [s for s in m["sources"] if "cusparselt" not in s["url"]]
        m["items"] = [i for i in m["items"] if not i["path"].startswith("cusparselt/")]
        shutil.rmtree(str(dest / "cusparselt"))

    def flip_a_byte(dest, m):
        path = dest / repo / "libnccl2_2.28.7-1+cuda13.0_amd64.deb"
        data = bytearray(path.read_bytes())
        data[-1] ^= 1
        path.write_bytes(bytes(data))

    def other_python(dest, m):
        text = json.dumps(m).replace("py3.11", "py3.12").replace("cp311-x86_64", "cp312-x86_64")
        m.clear()
        m.update(json.loads(text))
        m["targets"][0]["python"] = "3.12"
        shutil.move(str(dest / "wheels" / "cp311-x86_64"), str(dest / "wheels" / "cp312-x86_64"))

    refusals = {
        "missing": (drop_installer, r"cusparselt: cuSPARSELt installer \(file://\S+\): not in the bundle"),
        "changed": (flip_a_byte, r"does not match its manifest\.json, nothing was changed .*"
                                 r"apt/ubuntu2404/x86_64/libnccl2_2\.28\.7-1\+cuda13\.0_amd64\.deb: sha256 [0-9a-f]{64}, "
                                 r"the manifest says [0-9a-f]{64}"),
        "python": (other_python, r"cuda_libs: CUDA apt repository \(file://\S+\): the bundle has it for "
                                 r"ubuntu2404-amd64-py3\.12 only, this host is ubuntu2404-amd64-py3\.11"),
    }
    # One host is enough here (the no-bundle run above stops both): each is a run of preflight.
    for name, (edit, expected) in refusals.items():
        proc, recap = spark(site, bad_copy(site, bundle, "bad-" + name, edit), limit="h1")
        assert proc.returncode == 2 and recap == {"h1": (0, 1)}, (name, proc.stdout[-6000:])
        assert re.search(expected, proc.stdout), (name, proc.stdout[-6000:])
    assert dict((h, snapshot(site, h)) for h in HOSTS) == before, "a refused run changed a host"

    # 4. With the bundle: the whole playbook converges offline on both, and a rerun on h2 changes nothing.
    proc, recap = spark(site, bundle)
    assert proc.returncode == 0 and all(c > 0 and f == 0 for c, f in recap.values()), proc.stdout[-8000:]
    assert re.search(r"h1\s+cuda_libs: CUDA apt repository\s+file://\S+\s+bundle:\s+apt/ubuntu2404/x86_64",
                     proc.stdout)
    for host in HOSTS:
        state = on(site, host, "cat /etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list; "
                               "dpkg-query -W -f '${Package} ${Version}\\n' libcublas-13-0 libnccl2 libcusparselt0-cuda-13; "
                               "/opt/sparkforge/venv/bin/python -c 'import torch, torchvision, torchaudio; "
                               "print(torch.__version__, torchvision.__version__, torchaudio.__version__)'").stdout
        assert "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] file://%s/apt/ubuntu2404/x86_64/ /" \
            % HOST_BUNDLE in state, state
        assert "libcublas-13-0 13.0.2.14-1" in state and "libnccl2 2.28.7-1+cuda13.0" in state, state
        assert "libcusparselt0-cuda-13 0.8.1.1-1" in state, state
        assert re.search(r"^2\.10\.0\S* 0\.25\.0\S* 2\.10\.0\S*$", state, re.M), (host, state)
    # h2 built torch from the bundle's mirror of the pinned tag.
    built = on(site, "h2", "ls /opt/sparkforge/build/pytorch/src/.git >/dev/null && "
                           "git -C /opt/sparkforge/build/pytorch/src remote get-url origin").stdout
    assert built.strip() == "file://%s/%s" % (HOST_BUNDLE, [s for s in mirrors if s["url"].endswith("/pytorch")][0][
        "targets"]["any"]["path"]), built
    # The rerun is h2's: the bundle's copy, apt and the installer as h1 has them, and the builds from the
    # mirrors, now reused. h1's install from an index reruns in the journey (tests/e2e/test_journey.py, stage 5).
    proc, recap = spark(site, bundle, limit="h2")
    assert proc.returncode == 0 and recap == {"h2": (0, 0)}, proc.stdout[-8000:]
