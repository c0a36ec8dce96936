"""The execution environment definition (execution-environment.yml) gives a valid build context.

`ansible-builder create` runs for real, the guide's line as written (docs/guides/api-cli-ee.md).  Building
the image needs the base image from a container registry, which this test bed cannot reach, so the stages
that do not need it are replayed here instead: every file the Containerfile copies is in the context, the
galaxy stage's install command installs the collection from the context, and the builder stage's
introspection finds the collection's Python and system requirements.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

import readme
from helpers import COLLECTION, REPO

BIN = os.path.dirname(sys.executable)


def guide_lines():
    """The guide's two lines (docs/guides/api-cli-ee.md, "Execution environment"): create, then build."""
    create, build = readme.commands("api-cli-ee.md", "## Execution environment (AWX / Automation Controller)")
    return create, build


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """The guide's `create` line as written, from the root of a stand-in checkout (this repository's definition,
    ee/ and collection; .venv the tests' venv): the build context in its ./context."""
    create, _ = guide_lines()
    assert create.startswith(".venv/bin/ansible-builder create -f execution-environment.yml "), create
    checkout = tmp_path_factory.mktemp("ee") / "checkout"
    checkout.mkdir()
    for name in ("execution-environment.yml", "ee", "collections"):
        os.symlink(os.path.join(REPO, name), str(checkout / name))
    os.symlink(sys.prefix, str(checkout / ".venv"))
    proc = subprocess.run(["bash", "-c", create], cwd=str(checkout), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    return checkout / "context"


def test_the_build_line_builds_what_create_writes():
    """`build` is not run here (its base image is in a container registry): it takes the same definition as
    `create`, and tags the image."""
    create, build = guide_lines()
    assert build.startswith(".venv/bin/ansible-builder build -f execution-environment.yml -t "), build
    assert build.split()[2:4] == create.split()[2:4], (create, build)


def containerfile_lines(ctx):
    with open(os.path.join(ctx, "Containerfile")) as handle:
        return [line.strip() for line in handle]


def test_every_copied_source_is_in_the_context(context):
    copies = []
    for line in containerfile_lines(context):
        words = shlex.split(line) if line.startswith(("COPY ", "ADD ")) else []
        if words and not any(w.startswith("--from") for w in words):
            copies.extend(words[1:-1])
    assert copies, "the Containerfile copies nothing from the context"
    for src in copies:
        assert os.path.exists(os.path.join(context, src)), src


def test_ansible_pins_match_the_project(context):
    """The image runs the ansible-core and ansible-runner the test suite runs (pyproject.toml)."""
    with open(os.path.join(REPO, "pyproject.toml")) as handle:
        pyproject = handle.read()
    pins = re.findall(r'"(ansible-(?:core|runner)==[^"]+)"', pyproject)
    assert len(pins) == 2, pyproject
    refs = [line for line in containerfile_lines(context) if line.startswith("ARG ANSIBLE_INSTALL_REFS=")]
    assert refs, "no ANSIBLE_INSTALL_REFS in the Containerfile"
    assert sorted(refs[0].split("=", 1)[1].strip('"').split()) == sorted(pins)


def test_galaxy_stage_installs_the_collection_and_introspection_finds_its_needs(context, tmp_path):
    build = os.path.join(context, "_build")
    with open(os.path.join(build, "requirements.yml")) as handle:
        reqs = yaml.safe_load(handle)
    assert [c["type"] for c in reqs["collections"]] == ["dir"]
    # The galaxy stage's own command (WORKDIR /build is the context's _build/).
    install = [line for line in containerfile_lines(context) if "ansible-galaxy collection install" in line]
    assert len(install) == 1 and "-r requirements.yml" in install[0], install
    dest = tmp_path / "collections"
    # As in the image's build stage: no ansible.cfg of this repository, whose collections_path already
    # holds sparkforge.stack (ansible-galaxy would report it installed and install nothing).
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "-r", "requirements.yml",
                           "--collections-path", str(dest)],
                          cwd=build, env=clean, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout
    installed = dest / "ansible_collections" / "sparkforge" / "stack"
    with open(os.path.join(COLLECTION, "galaxy.yml")) as handle:
        version = yaml.safe_load(handle)["version"]
    assert (installed / "MANIFEST.json").is_file()
    assert '"version": "%s"' % version in (installed / "MANIFEST.json").read_text()
    for module in os.listdir(os.path.join(COLLECTION, "plugins", "modules")):
        assert (installed / "plugins" / "modules" / module).is_file(), module
    # The builder stage's introspection, with the script ansible-builder put in the context.
    proc = subprocess.run([sys.executable, os.path.join(build, "scripts", "introspect.py"), "introspect",
                           "--sanitize", str(dest)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout
    found = yaml.safe_load(proc.stdout[proc.stdout.index("---"):])
    system = " ".join(found["system"])
    assert "openssh-clients [platform:rpm]" in system and "from collection sparkforge.stack" in system
    assert any(req.startswith("Jinja2") for req in found["python"]), found
