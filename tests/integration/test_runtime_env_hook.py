"""The runtime_env SDPA import hook switches backends off when torch is imported, and does nothing otherwise."""

import os
import subprocess
import sys

from helpers import COLLECTION

HOOK_DIR = os.path.join(COLLECTION, "roles", "runtime_env", "files")


def _stand_in_torch(tmp_path):
    """Records enable_*_sdp calls, like torch.backends.cuda's switches (the GPU-side boundary)."""
    pkg = tmp_path / "torch"
    (pkg / "backends").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import backends\n")
    (pkg / "backends" / "__init__.py").write_text("from . import cuda\n")
    (pkg / "backends" / "cuda.py").write_text(
        "disabled = []\n"
        "def enable_flash_sdp(on):\n    disabled.append(('flash', on))\n"
        "def enable_mem_efficient_sdp(on):\n    disabled.append(('mem_efficient', on))\n"
        "def enable_cudnn_sdp(on):\n    disabled.append(('cudnn', on))\n")
    return str(tmp_path)


def _run(tmp_path, value):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HOOK_DIR, _stand_in_torch(tmp_path)]))
    env.pop("SPARKFORGE_SDPA_DISABLE", None)
    if value is not None:
        env["SPARKFORGE_SDPA_DISABLE"] = value
    code = "import sparkforge_runtime_hook, torch; print(torch.backends.cuda.disabled)"
    return subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=True)


def test_hook_disables_listed_backends(tmp_path):
    proc = _run(tmp_path, "mem_efficient, cudnn")
    assert proc.stdout.strip() == "[('mem_efficient', False), ('cudnn', False)]"


def test_hook_is_inert_without_setting(tmp_path):
    assert _run(tmp_path, None).stdout.strip() == "[]"


def test_unknown_backend_warns_but_never_breaks_import(tmp_path):
    proc = _run(tmp_path, "warp_drive,flash")
    assert proc.stdout.strip() == "[('flash', False)]"
    assert "cannot switch off SDPA backend 'warp_drive'" in proc.stderr
