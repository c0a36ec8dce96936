"""The CUDA release of the math libraries is spelt once in the manifest's cuda.yml (sparkforge_cuda_minor): the
package names, version patterns and install paths are derived from it by Jinja, rendered by Ansible's own
templating here as the roles see them. The defaults render to the names NVIDIA's repository has for CUDA 13.0,
and changing sparkforge_cuda_minor alone changes every one of them."""

import os
import re

import yaml
from ansible.template import Templar, trust_as_template

from helpers import MANIFEST_DIR, load_manifest

DERIVED = ("sparkforge_cuda_libs_packages", "sparkforge_cuda_libs_paths")

# What the defaults render to: NVIDIA's CUDA 13.0 package names and install paths.
CUDA_13_0 = {
    "sparkforge_cuda_libs_packages": {
        "cublas": {"packages": ["libcublas-13-0", "libcublas-dev-13-0"], "version": "13.0.*"},
        "cudnn": {"packages": ["cudnn9-cuda-13", "libcudnn9-dev-cuda-13"], "version": "9.*"},
        "nccl": {"packages": ["libnccl2", "libnccl-dev"], "version": "2.*+cuda13.0"},
        "gds": {"packages": ["nvidia-gds"], "version": "13.0.*"},
    },
    "sparkforge_cuda_libs_paths": {
        "cublas": {"include_dir": "/usr/local/cuda-13.0/targets/{targets}/include",
                   "library": "/usr/local/cuda-13.0/targets/{targets}/lib/libcublas.so"},
        "cudnn": {"include_dir": "/usr/include/{triplet}", "library": "/usr/lib/{triplet}/libcudnn.so"},
        "nccl": {"include_dir": "/usr/include", "library": "/usr/lib/{triplet}/libnccl.so"},
        "gds": {"include_dir": "/usr/local/cuda-13.0/targets/{targets}/include",
                "library": "/usr/local/cuda-13.0/targets/{targets}/lib/libcufile.so.0"},
    },
}


def trusted(value):
    """The manifest's strings as Ansible holds a role's defaults: templates it may render."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def rendered(**overrides):
    data = trusted(load_manifest())
    data.update(overrides)
    templar = Templar(variables=data)
    return dict((name, templar.template(data[name])) for name in DERIVED)


def strings(value):
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value]


def test_the_defaults_render_to_nvidias_cuda_13_0_names():
    assert load_manifest()["sparkforge_cuda_minor"] == "13.0"
    assert rendered() == CUDA_13_0


def test_changing_the_cuda_minor_alone_changes_every_derived_name():
    other = rendered(sparkforge_cuda_minor="12.9")
    expected = yaml.safe_load(yaml.safe_dump(CUDA_13_0).replace("13.0", "12.9").replace("13-0", "12-9")
                              .replace("cuda-13\n", "cuda-12\n"))
    assert other == expected
    assert [s for s in strings(other) if "13" in s] == []
    changed = [a for a, b in zip(strings(CUDA_13_0), strings(other)) if a != b]
    assert len(changed) == 11, changed  # 4 package names, 3 version patterns, 4 paths


def test_the_cuda_minor_is_spelt_once_in_cuda_yml():
    with open(os.path.join(MANIFEST_DIR, "cuda.yml")) as handle:
        lines = [line for line in handle.read().splitlines() if not line.lstrip().startswith("#")]
    spelt = [line for line in lines if re.search(r"13[.-]0|cuda-?13\b", line)]
    assert spelt == ['sparkforge_cuda_minor: "13.0"'], spelt
