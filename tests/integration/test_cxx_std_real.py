# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The C++ standard of real GPU packages' builds planned against several torch releases (module_utils/packages/
cxx_std.py), with the manifest's data: each conflict named at plan time from the sdist's own setup.py, nothing built.

Default lane: sdists made of tests/fixtures/cxx (the exact lines of the real setup.py files that decide the
standard).  Full lane (network): the real sdists from PyPI, sha256 checked, planned the same way; and a small
real C++ extension (tests/fixtures/cxx/ext/add_one.cpp, torch/extension.h) compiled against the real headers of
torch 2.13.0 (needs C++17) and 2.14.0 (needs C++20), read from the PyPI wheels with HTTP range requests (about
10 MB each, not the 530 MB wheels): with the standard flash-attn's setup.py forces it stops at torch's #error,
with the standard after the manifest's fix it compiles against 2.14.0 (an object file) and is accepted by the
compiler's front end against 2.13.0 (-fsyntax-only: parsed and instantiated, no code generated)."""

import copy
import hashlib
import io
import os
import shutil
import subprocess
import sysconfig
import tarfile
import urllib.request
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import cxx_std, heavy_build
from helpers import REPO

FIXTURES = os.path.join(REPO, "tests", "fixtures", "cxx")
SDISTS = {
    "flash-attn": ("flash_attn-2.8.3.post2", "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b",
                   "https://files.pythonhosted.org/packages/6c/b1/b77625e3d11260d2bd6a4fc249a4be9a3da97ff848e2222e810c4f0e0211/"
                   "flash_attn-2.8.3.post2.tar.gz"),
    "causal-conv1d": ("causal_conv1d-1.7.0", "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
                      "https://files.pythonhosted.org/packages/f4/d1/eba27735f31bd5527d39a3c7f693e6ded7b844cab275db719a15ad37b6cd/"
                      "causal_conv1d-1.7.0.tar.gz"),
    "xformers": ("xformers-0.0.35", "f7fc183a58e4bf0e2ae339a18fb1b1d4a37854c0f2545b4f360fef001646ab76",
                 "https://files.pythonhosted.org/packages/de/5a/6e27734bd793adc44d0b8d294e67cfacf4ec590572c1aef51d683fc7a791/"
                 "xformers-0.0.35.tar.gz"),
}
# torch-<release>-cp311-cp311-manylinux_2_28_x86_64.whl on PyPI: (size, sha256, url) as the index lists them.
WHEELS = {
    "2.13.0": (526574961, "60fcdcb2f3876e21146cb4524ef06397d727ca9ad5f020818547e25075fe3cb7",
               "https://files.pythonhosted.org/packages/01/79/1f2d34ad7034ee1c7ffc1cf8bf0f8213af2a81df6ecdb3997ecec107c09d/"
               "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
    "2.14.0": (554583496, "8d9e232b6376c62f3090237889fb1cb6887c0ece9f73e6c1052e80fc1481f999",
               "https://files.pythonhosted.org/packages/8d/be/c0c8a845bf00552960d2f1f6a00b6ac9750fd312f55429c3e8c6c0e3aac4/"
               "torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
}
CACHE = os.path.join(REPO, ".cache", "cxx-std")
GCC = ("gcc", "12.2.0")
# (package, torch release) -> the standard the build ends up with, or the refusal's words.
EXPECTED = {
    ("flash-attn", "2.13.0"): 20, ("flash-attn", "2.14.0"): 20, ("flash-attn", "2.15.0"): 20,
    ("causal-conv1d", "2.13.0"): 17, ("causal-conv1d", "2.14.0"): 20, ("causal-conv1d", "2.15.0"): 20,
    ("xformers", "2.13.0"): 17,
    ("xformers", "2.14.0"): "xformers 0.0.35 builds as C++17",
    ("xformers", "2.15.0"): "xformers 0.0.35 builds as C++17",
}


def fixture_sdist(tmp_path, package):
    name = SDISTS[package][0]
    archive = str(tmp_path / ("%s.tar.gz" % name))
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(os.path.join(FIXTURES, name), arcname=name)
    return archive


def plan(manifest, package, torch, project, gpu_build=None, compiler=GCC):
    releases = manifest["sparkforge_torch_releases"]
    release = SDISTS[package][0].split("-", 1)[1]
    entry = gpu_build if gpu_build is not None else manifest["sparkforge_ml_packages"][package]["gpu_build"]
    return cxx_std.plan_build(package, release, entry,
                              cxx_std.torch_requirement(torch, releases, manifest["sparkforge_torch_cxx_checked"]),
                              releases, manifest["sparkforge_cxx_min_compilers"], compiler,
                              cxx_std.project_files(project))


def judge(manifest, projects):
    """Each package's build planned against each torch release; ``projects``: package -> its unpacked sdist (one
    unpack serves the three plans: planning reads the project's files, never writes them)."""
    for (package, torch), want in sorted(EXPECTED.items()):
        build = plan(manifest, package, torch, projects[package])
        if isinstance(want, int):
            assert build["problems"] == [] and build["std"] == want, (package, torch, build)
        else:
            (problem,) = build["problems"]
            assert want in problem and "torch %s's headers require C++20" % torch in problem, problem
            assert "pin sparkforge_torch_version to 2.13.0" in problem and "or leave xformers out" in problem
            assert "setup.py line" in problem and '"-std=c++17"' in problem
        assert build["torch_std"] == (17 if torch == "2.13.0" else 20)
        assert "ATen/ATen.h" in build["torch_source"] or "carried from 2.14.0" in build["torch_source"]
        if package == "causal-conv1d":
            # Its -std=c++17 lines are in the ROCm branch: named as ignored, torch's cpp_extension picks.
            assert build["flags"] == [] and len(build["ignored"]) == 2 and "HIP_BUILD" in build["ignored"][0]


def test_fixture_sdists_planned_against_three_torch_releases(manifest, tmp_path):
    judge(manifest, dict((package, heavy_build.unpack_sdist(fixture_sdist(tmp_path, package), str(tmp_path / package)))
                         for package in SDISTS))


def test_flash_attn_without_the_manifest_fix_is_refused_for_the_releases_that_need_cxx20(manifest, tmp_path):
    gpu_build = copy.deepcopy(manifest["sparkforge_ml_packages"]["flash-attn"]["gpu_build"])
    gpu_build["fixes"] = [f for f in gpu_build["fixes"] if "cxx_std" not in f]
    project = heavy_build.unpack_sdist(fixture_sdist(tmp_path, "flash-attn"), str(tmp_path / "src"))
    assert plan(manifest, "flash-attn", "2.13.0", project, gpu_build)["problems"] == []
    for torch in ("2.14.0", "2.15.0"):
        (problem,) = plan(manifest, "flash-attn", torch, project, gpu_build)["problems"]
        assert problem.startswith("flash-attn 2.8.3.post2 builds as C++17 (setup.py line ")
        assert "torch %s's headers require C++20" % torch in problem and "cxx_std: 20" in problem


def test_the_fix_applied_to_the_sdist_is_what_the_plan_counted(manifest, tmp_path):
    """The build applies the same fix (heavy_build.apply_fixes): its setup.py then passes -std=c++20 only."""
    project = heavy_build.unpack_sdist(fixture_sdist(tmp_path, "flash-attn"), str(tmp_path / "src"))
    fixes = manifest["sparkforge_ml_packages"]["flash-attn"]["gpu_build"]["fixes"]
    assert [f["replaced"] for f in heavy_build.apply_fixes(project, fixes, "flash-attn")] == [4]
    flags = cxx_std.read_files(cxx_std.project_files(project))
    assert sorted(set(f["flag"] for f in flags)) == ["-std=c++20"]


def test_an_old_gcc_is_refused_for_the_fixed_build_in_the_same_pass(manifest, tmp_path):
    project = heavy_build.unpack_sdist(fixture_sdist(tmp_path, "flash-attn"), str(tmp_path / "src"))
    (problem,) = plan(manifest, "flash-attn", "2.15.0", project, compiler=("gcc", "10.5.0"))["problems"]
    assert "flash-attn 2.8.3.post2 builds as C++20, which needs Clang >= 10 or GCC >= 11" in problem
    assert "this host's c++ is GCC 10.5.0" in problem


# ---- full lane: the real sdists and real PyTorch headers ---------------------------------------------------------

def fetch(url, sha256, dest):
    if not os.path.isfile(dest):
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with urllib.request.urlopen(url, timeout=120) as answer:
            data = answer.read()
        with open(dest + ".part", "wb") as handle:
            handle.write(data)
        os.replace(dest + ".part", dest)
    with open(dest, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == sha256, dest
    return dest


class RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests (a wheel's zip directory and one span of members)."""

    def __init__(self, url, size):
        io.RawIOBase.__init__(self)
        self.url, self.size, self.pos, self.spans = url, size, 0, []

    def get(self, start, end):
        request = urllib.request.Request(self.url, headers={"Range": "bytes=%d-%d" % (start, end)})
        with urllib.request.urlopen(request, timeout=300) as answer:
            data = answer.read()
        self.spans.append((start, data))
        return data

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, buffer):
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        for start, data in self.spans:
            if start <= self.pos and self.pos + n <= start + len(data):
                buffer[:n] = data[self.pos - start:self.pos - start + n]
                self.pos += n
                return n
        data = self.get(self.pos, self.pos + n - 1)
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)


def torch_headers(release):
    """torch/include of the release's PyPI wheel (cached under .cache/cxx-std)."""
    dest = os.path.join(CACHE, "torch-%s" % release)
    if os.path.isfile(os.path.join(dest, "complete")):
        return os.path.join(dest, "torch", "include")
    size, _sha, url = WHEELS[release]
    remote = RangeFile(url, size)
    remote.get(size - 4 * 1024 * 1024, size - 1)  # the central directory
    wheel = zipfile.ZipFile(io.BufferedReader(remote, buffer_size=1 << 20))
    members = [m for m in wheel.infolist() if m.filename.startswith("torch/include/")]
    offsets = sorted(m.header_offset for m in wheel.infolist())
    last = max(m.header_offset for m in members)
    after = [o for o in offsets if o > last]
    remote.get(min(m.header_offset for m in members), (after[0] if after else size) - 1)
    shutil.rmtree(dest, ignore_errors=True)
    for member in members:
        if not member.is_dir():
            wheel.extract(member, dest)
    open(os.path.join(dest, "complete"), "w").close()
    return os.path.join(dest, "torch", "include")


def compile_extension(include, flags, tmp_path, object_file=True):
    """c++ -c add_one.cpp against torch's headers with the standard flags the build passes; (rc, output).
    Without ``object_file`` the compiler's front end alone (-fsyntax-only: every header parsed, every template the
    extension uses instantiated and checked, no code generated; about a quarter less CPU)."""
    source = os.path.join(FIXTURES, "ext", "add_one.cpp")
    out = ["-c", "-O0", "-o", str(tmp_path / "add_one.o")] if object_file else ["-fsyntax-only"]
    cmd = ["c++"] + out + ["-fPIC", "-Wfatal-errors", source,
           "-I" + include, "-I" + os.path.join(include, "torch", "csrc", "api", "include"),
           "-I" + sysconfig.get_paths()["include"], "-DTORCH_EXTENSION_NAME=add_one"] + flags
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return done.returncode, done.stdout


@pytest.fixture(scope="module")
def real_projects(tmp_path_factory):
    """package -> the real sdist from PyPI (sha256 checked), unpacked once for the module (flash-attn's is about
    100 MB unpacked: several CPU seconds an unpack). A test that changes one works on a copy."""
    top = tmp_path_factory.mktemp("real")
    return dict((package, heavy_build.unpack_sdist(fetch(url, sha, os.path.join(CACHE, os.path.basename(url))),
                                                   str(top / package)))
                for package, (_name, sha, url) in SDISTS.items())


@pytest.mark.full
def test_real_sdists_from_pypi_planned_against_three_torch_releases(manifest, real_projects):
    judge(manifest, real_projects)
    for package, project in real_projects.items():
        # Every line of the fixture excerpt is a line of the real setup.py.
        with open(os.path.join(project, "setup.py")) as handle:
            real = handle.read().splitlines()
        with open(os.path.join(FIXTURES, SDISTS[package][0], "setup.py")) as handle:
            assert [line for line in handle.read().splitlines() if line not in real] == []


@pytest.mark.full
@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
def test_flash_attn_standard_before_and_after_the_fix_compiles_against_real_torch_headers(manifest, tmp_path,
                                                                                         real_projects):
    project = str(tmp_path / "src")
    shutil.copytree(real_projects["flash-attn"], project, symlinks=True)  # the fix below edits it
    forced = sorted(set(f["flag"] for f in cxx_std.read_files(cxx_std.project_files(project)) if f["applies"]))
    assert forced == ["-std=c++17"]
    heavy_build.apply_fixes(project, manifest["sparkforge_ml_packages"]["flash-attn"]["gpu_build"]["fixes"],
                            "flash-attn")
    fixed = sorted(set(f["flag"] for f in cxx_std.read_files(cxx_std.project_files(project)) if f["applies"]))
    assert fixed == ["-std=c++20"]
    rc, out = compile_extension(torch_headers("2.14.0"), forced, tmp_path)
    # torch/extension.h reaches torch/all.h's #error ("... to use PyTorch.") before ATen.h's ("... to use ATen.").
    assert rc != 0 and "#error C++20 or later compatible compiler is required to use" in out, out[-2000:]
    # 2.14.0, the release whose headers need C++20, compiled to an object; 2.13.0's headers accepted by the
    # compiler's front end with the same flags (the fixed standard is not refused by the older release either).
    for release, object_file in (("2.13.0", False), ("2.14.0", True)):
        rc, out = compile_extension(torch_headers(release), fixed, tmp_path, object_file)
        assert rc == 0, (release, out[-3000:])
    assert os.path.getsize(str(tmp_path / "add_one.o")) > 0
