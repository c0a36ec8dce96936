# -*- coding: utf-8 -*-
# Copyright: sparkforge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each GPU package runs once on the host: its smoke test, data of its matrix entry (``smoke``).

``smoke``: {import (the module to import), op (the operation, in words), code (Python that sets
``got``, the package's result, and ``want``, a plain PyTorch reference, on the GPU), rtol, atol}.
The code runs in the venv's Python (``torch`` imported for it); the result passes when
``torch.allclose(got, want, rtol, atol)``.  An arch audit sees which kernels a library holds, not
whether they compute the right thing (FlashInfer's wrong output on GB10 with sm_120 kernels
present, flashinfer#3294): this does.

Where torch sees no CUDA device (a CPU host, the test bed's fake GPUs) the test is skipped and
the result says why; it is never run on the CPU in its place.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

SMOKE_KEYS = ("import", "op", "code", "rtol", "atol")

# Runs in the venv's Python: one JSON line on stdout whatever happens.
RUNNER = r'''
import importlib, json, sys
spec = json.loads(sys.argv[1])
out = {"package": spec["package"], "op": spec["op"], "status": "failed", "error": None, "reason": ""}
def done(**kw):
    out.update(kw)
    print(json.dumps(out))
    sys.exit(0)
try:
    import torch
except Exception as exc:
    done(error="import torch: %s: %s" % (type(exc).__name__, exc))
if not torch.cuda.is_available():
    done(status="skipped", reason="torch %s in the venv sees no CUDA device (torch.cuda.is_available() is False): "
         "no GPU to run %s on" % (torch.__version__, spec["op"]))
try:
    importlib.import_module(spec["import"])
except Exception as exc:
    done(error="import %s: %s: %s" % (spec["import"], type(exc).__name__, exc))
scope = {"torch": torch}
try:
    exec(spec["code"], scope)
    got, want = scope["got"].float(), scope["want"].float()
    torch.cuda.synchronize()
    err = (got - want).abs().max().item()
    ok = bool(torch.allclose(got, want, rtol=spec["rtol"], atol=spec["atol"]))
except Exception as exc:
    done(error="%s: %s" % (type(exc).__name__, exc))
done(status="passed" if ok else "failed", max_abs_err=err, device=torch.cuda.get_device_name(0),
     error=None if ok else "max abs error %g against the reference exceeds atol %g + rtol %g" % (
         err, spec["atol"], spec["rtol"]))
'''


class SmokeError(Exception):
    pass


def validate(package, smoke):
    """The entry's smoke mapping, checked; None when it has none."""
    if smoke is None:
        return None
    if not isinstance(smoke, dict):
        raise SmokeError("%s: smoke must be a mapping (%s), got %r" % (package, ", ".join(SMOKE_KEYS), smoke))
    unknown = sorted(set(smoke) - set(SMOKE_KEYS))
    missing = [k for k in SMOKE_KEYS if smoke.get(k) in (None, "")]
    if unknown or missing:
        detail = "; unknown: %s" % ", ".join(unknown) if unknown else "; missing: %s" % ", ".join(missing)
        raise SmokeError("%s: smoke needs %s%s" % (package, ", ".join(SMOKE_KEYS), detail))
    for key in ("rtol", "atol"):
        if isinstance(smoke[key], bool) or not isinstance(smoke[key], (int, float)) or smoke[key] < 0:
            raise SmokeError("%s: smoke.%s must be a number >= 0, got %r" % (package, key, smoke[key]))
    try:
        compile(smoke["code"], "%s smoke" % package, "exec")
    except SyntaxError as exc:
        raise SmokeError("%s: smoke.code is not Python: %s" % (package, exc))
    return dict(smoke)


def run(system, python, package, smoke, env=None):
    """Run one package's smoke test with the venv's ``python``; {package, op, status, error, reason, ...}."""
    spec = dict(smoke, package=package)
    spec["rtol"], spec["atol"] = float(spec["rtol"]), float(spec["atol"])
    rc, out, err = system.run([python, "-c", RUNNER, json.dumps(spec)], env)
    lines = [line for line in (out or "").splitlines() if line.startswith("{")]
    if rc != 0 or not lines:
        return {"package": package, "op": smoke["op"], "status": "failed", "reason": "",
                "error": "the smoke test's Python exited %s: %s" % (rc, ((err or "") + (out or "")).strip()[-400:])}
    return json.loads(lines[-1])


def message(result):
    """One line naming the package, the op and what happened."""
    if result["status"] == "skipped":
        return "smoke test of %s (%s) skipped: %s" % (result["package"], result["op"], result["reason"])
    if result["status"] == "passed":
        return "smoke test of %s (%s) passed on %s (max abs error %g)" % (
            result["package"], result["op"], result.get("device"), result.get("max_abs_err"))
    return "smoke test of %s (%s) failed: %s" % (result["package"], result["op"], result["error"])
