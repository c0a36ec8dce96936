#!/usr/bin/env python3
"""Reproducible wheels on the GPU machine (Ubuntu 24.04, its own CUDA 13 nvcc), and the normalised
CUDA library running on its GPU.

The PyTorch-shaped fixture (tests/fixtures/pytorch: a real nvcc kernel for TORCH_CUDA_ARCH_LIST) is
built twice with the stack's reproducibility settings (module_utils/build/repro.py, what
pytorch_wheel_build uses): two build directories of different depth, two time zones, two home
directories and user names, the second build two seconds later.  Then:

- the two wheels' sha256, what normalising changed, and wheel_diff of two raw builds (before
  normalising) next to the normalised pair;
- the normalised wheel's CUDA library is loaded into a process with the machine's torch, and its
  kernel (out = a * s) is launched on the GPU on torch's memory and checked.

usage: repro_gpu.py OUT_JSON [ARCH]      (ARCH default 9.0)
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "collections"))
from ansible_collections.sparkforge.stack.plugins.module_utils.build import repro  # noqa: E402


def build(src, root, arch, env_extra, normalise=True):
    """pip wheel of the fixture in a copy of ``src`` under ``root``, as pytorch_wheel_build runs it."""
    work = os.path.join(root, "build")
    tree = os.path.join(work, "src")
    subprocess.check_call(["git", "clone", "-q", src, tree])
    commit = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=tree).decode().strip()
    env = dict(os.environ, **env_extra)
    env.update({"TORCH_CUDA_ARCH_LIST": arch, "USE_CUDA": "1", "PYTORCH_BUILD_VERSION": "2.12.0",
                "PYTORCH_BUILD_NUMBER": "1", "MAX_JOBS": "4", "CUDA_HOME": "/usr/local/cuda"})
    env["PATH"] = "/usr/local/cuda/bin:" + env["PATH"]
    epoch, maps, env = repro.build_settings(tree, commit, [(work, "/sparkforge/build"), (tree, "/sparkforge/src"),
                                                            (env.get("TMPDIR"), "/tmp")], env)
    out = os.path.join(work, "dist")
    subprocess.check_call([sys.executable, "-m", "pip", "wheel", ".", "--no-build-isolation", "--no-deps",
                           "--disable-pip-version-check", "-q", "-w", out], cwd=tree, env=env)
    wheel = os.path.join(out, os.listdir(out)[0])
    record = repro.finish_wheel(wheel, epoch, maps, {"build_dir": work, "home": env_extra["HOME"],
                                                     "host_name": os.uname()[1]}) if normalise else None
    return wheel, record


def run_kernel(wheel, workdir):
    """Load the wheel's CUDA library next to torch and check out = a * 2.5 on the GPU."""
    import torch
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("torch/lib/libtorch_fixture_cuda.so", workdir)
    lib = ctypes.CDLL(os.path.join(workdir, "torch", "lib", "libtorch_fixture_cuda.so"))
    n = 1 << 20
    a = torch.arange(n, dtype=torch.float32, device="cuda")
    out = torch.empty_like(a)
    lib.fixture_launch_scale(ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_float(2.5),
                             ctypes.c_int(n))
    torch.cuda.synchronize()
    return {"device": torch.cuda.get_device_name(0), "capability": "%d.%d" % torch.cuda.get_device_capability(0),
            "elements": n, "exact": bool(torch.equal(out, a * 2.5)), "torch": torch.__version__}


def main(out_json, arch="9.0"):
    top = tempfile.mkdtemp(prefix="repro-gpu-")
    src = os.path.join(top, "pytorch")
    subprocess.check_call([sys.executable, os.path.join(REPO, "tests", "fixtures", "pytorch", "make_repo.py"), src],
                          stdout=subprocess.DEVNULL)
    builders = [("a", "America/Los_Angeles", "alice"), ("b/deeper/still", "Asia/Kolkata", "bob")]
    result = {"arch": arch, "nvcc": subprocess.check_output(["/usr/local/cuda/bin/nvcc", "--version"]).decode()
              .strip().splitlines()[-1], "builds": []}
    wheels = []
    for rel, tz, user in builders:
        root = os.path.join(top, rel)
        home = os.path.join(top, "home-" + user)
        os.makedirs(home)
        started = time.time()
        wheel, record = build(src, root, arch, {"TZ": tz, "USER": user, "LOGNAME": user, "HOME": home})
        wheels.append(wheel)
        result["builds"].append({"dir": root, "tz": tz, "user": user, "sha256": repro.sha256_file(wheel),
                                 "normalized": record["normalized"], "leaks": record["leaks"],
                                 "seconds": round(time.time() - started, 1)})
        time.sleep(2.1)
    result["identical"] = result["builds"][0]["sha256"] == result["builds"][1]["sha256"]
    raw = [build(src, os.path.join(top, "raw%d" % i), arch, {"TZ": "UTC", "USER": "x", "LOGNAME": "x",
                                                                "HOME": top}, normalise=False)[0]
           for i in (1, 2)]
    result["raw_pair_summary"] = repro.summarize(repro.diff_wheels(*raw))
    result["normalized_pair_summary"] = repro.summarize(repro.diff_wheels(*wheels))
    result["gpu"] = run_kernel(wheels[0], os.path.join(top, "run"))
    with open(out_json, "w") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result, indent=1))
    shutil.rmtree(top, ignore_errors=True)
    return 0 if result["identical"] and result["gpu"]["exact"] else 1


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
