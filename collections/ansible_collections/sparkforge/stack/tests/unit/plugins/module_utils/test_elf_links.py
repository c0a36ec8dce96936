# -*- coding: utf-8 -*-
"""elf_links: what a GPU library links against, read from real shared objects built here.

One nvcc compile (a kernel object for sm_90) is linked by gcc into the libraries of every test: one
needing libcudart.so.12 (a stub of that soname; this host has CUDA 13 only), one needing the
toolkit's libcudart.so.13, and a torch extension stand-in that calls one symbol a stand-in libc10
exports and one it does not.  Each is checked through the audit of a built wheel and of a venv.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess
import zipfile

import pytest

from ansible_collections.sparkforge.stack.plugins.module_utils.packages import gpu_audit as ga
from ansible_collections.sparkforge.stack.plugins.module_utils.packages import elf_links

CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
NVCC = os.path.join(CUDA_HOME, "bin", "nvcc")
pytestmark = pytest.mark.skipif(not os.access(NVCC, os.X_OK) or shutil.which("gcc") is None,
                                reason="needs CUDA's nvcc at %s and gcc" % NVCC)
PRESENT = "_ZN3c1010present_fnEv"  # c10::present_fn()
MISSING = "_ZN3c1010missing_fnEv"  # c10::missing_fn()


def _cc(*args):
    subprocess.run(["gcc"] + list(args), check=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("links")
    out = dict((name, str(root / name)) for name in ("stub", "site", "objs"))
    for path in out.values():
        os.makedirs(path)
    torch_lib = os.path.join(out["site"], "torch", "lib")
    os.makedirs(torch_lib)
    (root / "stub.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n")
    _cc("-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", os.path.join(out["stub"], "libcudart.so.12"),
        str(root / "stub.c"))
    (root / "c10.c").write_text('int present(void) __asm__("%s");\nint present(void) { return 1; }\n' % PRESENT)
    _cc("-shared", "-fPIC", "-o", os.path.join(torch_lib, "libc10.so"), str(root / "c10.c"))
    (root / "k.cu").write_text("__global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }\n"
                               "extern \"C\" void launch(float *a) { k<<<1, 32>>>(a); }\n")
    kernel = os.path.join(out["objs"], "k.o")
    subprocess.run([NVCC, "-c", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_90,code=sm_90", "-o", kernel,
                    str(root / "k.cu")], check=True)
    (root / "ext.c").write_text('int present(void) __asm__("%s");\nint missing(void) __asm__("%s");\n'
                                "int op(void) { return present() + missing(); }\n" % (PRESENT, MISSING))
    ext = os.path.join(out["objs"], "ext.o")
    _cc("-c", "-fPIC", "-o", ext, str(root / "ext.c"))
    libs = {
        "cuda12": ["-L", out["stub"], "-l:libcudart.so.12"],
        "cuda13": ["-L", os.path.join(CUDA_HOME, "lib64"), "-l:libcudart.so.13"],
        "torchext": [ext, "-L", torch_lib, "-lc10"],
    }
    for name, extra in libs.items():
        out[name] = os.path.join(out["objs"], name + ".so")
        _cc("-shared", "-o", out[name], kernel, "-Wl,--no-as-needed", *extra)
    return out


def _wheel(tmp_path, libs):
    path = str(tmp_path / "pkg-1.0-cp312-cp312-linux_x86_64.whl")
    with zipfile.ZipFile(path, "w") as whl:
        for member, so in libs.items():
            whl.write(so, member)
        whl.writestr("pkg/__init__.py", "")
    return path


def test_dynamic_section_as_readelf_reads_it(built):
    info = elf_links.read_file(built["cuda12"])
    assert info["needed"][0] == "libcudart.so.12"
    if shutil.which("readelf"):
        text = subprocess.check_output(["readelf", "-d", built["cuda12"]]).decode()
        assert info["needed"] == [line.split("[", 1)[1].rstrip("]") for line in text.splitlines() if "(NEEDED)" in line]
    torch_ext = elf_links.read_file(built["torchext"])
    assert MISSING in torch_ext["undefined"] and PRESENT in torch_ext["undefined"]
    assert PRESENT in elf_links.read_file(os.path.join(built["site"], "torch", "lib", "libc10.so"))["defined"]
    assert elf_links.read_file(os.path.join(built["stub"], "libcudart.so.12"))["soname"] == "libcudart.so.12"
    if shutil.which("nm"):
        # Strong undefined symbols as binutils lists them ('U'; weak ones, 'w', are not required to resolve).
        text = subprocess.check_output(["nm", "-D", "--undefined-only", built["torchext"]]).decode()
        assert sorted(torch_ext["undefined"]) == sorted(
            line.split()[-1].split("@")[0] for line in text.splitlines() if line.split()[0] == "U")


def test_a_truncated_library_is_refused_not_misread(built, tmp_path):
    data = open(built["cuda12"], "rb").read()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(elf_links.ElfLinkError, match="section headers run past the end"):
        elf_links.read_file(str(cut))


def test_links_checked_against_this_host(built):
    host = elf_links.HostLinks(CUDA_HOME, built["site"])
    assert "13" in host.present["cudart"] and "12" not in host.present["cudart"]
    problems = elf_links.check_library(elf_links.read_file(built["cuda12"]), host)
    assert problems == [("cuda_library", "needs libcudart.so.12, which this host does not have (it has %s)"
                         % ", ".join("libcudart.so.%s" % v for v in host.present["cudart"]))]
    # Shipped beside it (auditwheel's pkg.libs/), it loads.
    assert elf_links.check_library(elf_links.read_file(built["cuda12"]), host, beside=["libcudart.so.12"]) == []
    assert elf_links.check_library(elf_links.read_file(built["cuda13"]), host) == []
    assert elf_links.check_library(elf_links.read_file(built["torchext"]), host) == [
        ("torch_symbol", "undefined symbol %s: built against another torch than the venv's" % MISSING)]
    no_torch = elf_links.HostLinks(CUDA_HOME, built["stub"])
    assert "the venv has no torch/lib" in elf_links.check_library(elf_links.read_file(built["torchext"]), no_torch)[0][1]


def test_built_wheel_refused_naming_the_library_or_the_symbol(built, tmp_path):
    host = elf_links.HostLinks(CUDA_HOME, built["site"])
    member = "pkg/_ext.cpython-312-x86_64-linux-gnu.so"
    result = ga.audit_wheel(_wheel(tmp_path, {member: built["cuda12"]}), ["9.0"], "pkg", links=host)
    assert not result["ok"] and result["libraries"][0]["verdicts"] == {"9.0": "native"}
    assert result["message"].startswith("pkg: refused by the link audit of pkg-1.0-cp312")
    assert "%s needs libcudart.so.12, which this host does not have" % member in result["message"]
    result = ga.audit_wheel(_wheel(tmp_path, {member: built["torchext"]}), ["9.0"], "pkg", links=host)
    assert not result["ok"] and "%s undefined symbol %s" % (member, MISSING) in result["message"]
    bundled = _wheel(tmp_path, {member: built["cuda12"],
                                "pkg.libs/libcudart.so.12": os.path.join(built["stub"], "libcudart.so.12")})
    result = ga.audit_wheel(bundled, ["9.0"], "pkg", links=host)
    assert result["ok"] and result["libraries"][0]["links"] == [], result


def test_venv_audit_per_distribution(built, tmp_path):
    """One library per CUDA release (bitsandbytes): one that loads is enough; a torch symbol missing never is."""
    site = tmp_path / "site-packages"
    shutil.copytree(os.path.join(built["site"], "torch"), str(site / "torch"))
    layout = {"old/_k.so": ("cuda12", "old"), "multi/k_cuda12.so": ("cuda12", "multi"),
              "multi/k_cuda13.so": ("cuda13", "multi"), "ext/_C.so": ("torchext", "ext")}
    for rel, (lib, dist) in layout.items():
        os.makedirs(str(site / os.path.dirname(rel)), exist_ok=True)
        shutil.copy(built[lib], str(site / rel))
    for dist in ("old", "multi", "ext"):
        info = site / ("%s-1.0.dist-info" % dist)
        info.mkdir()
        info.joinpath("RECORD").write_text("".join("%s,,\n" % rel for rel, (_l, d) in layout.items() if d == dist))
    result = ga.venv_audit(str(site), "9.0", links=elf_links.HostLinks(CUDA_HOME, str(site)))
    assert [f.split(":")[0] for f in result["failures"]] == ["ext cannot load here", "old cannot load here"]
    assert "undefined symbol %s" % MISSING in result["failures"][0]
    assert "old/_k.so: needs libcudart.so.12" in result["failures"][1]
    assert [n for n in result["notes"] if n.startswith("multi: multi/k_cuda12.so: needs libcudart.so.12")]
    assert result["packages"]["multi"]["libraries"][1]["links"] == []


def test_ld_so_conf_includes_are_followed(tmp_path):
    conf_d = tmp_path / "ld.so.conf.d"
    conf_d.mkdir()
    (conf_d / "cuda.conf").write_text("# the toolkit\n/usr/local/cuda-13.0/lib\n")
    (tmp_path / "ld.so.conf").write_text("include ld.so.conf.d/*.conf\n/opt/lib\n")
    assert elf_links.ld_so_conf_dirs(str(tmp_path / "ld.so.conf")) == ["/opt/lib", "/usr/local/cuda-13.0/lib"]
