"""Import causal-conv1d, run its forward op on the GPU and compare with a plain PyTorch reference.

The reference is a grouped (depthwise) conv1d with left padding width-1, truncated to seqlen, plus
bias and SiLU: what causal_conv1d_fn computes per its docstring (x: (batch, dim, seqlen), weight:
(dim, width), bias: (dim,)).
"""
import json
import sys

import torch
import torch.nn.functional as F

from causal_conv1d import causal_conv1d_fn


def reference(x, weight, bias):
    width = weight.shape[1]
    out = F.conv1d(x, weight.unsqueeze(1), bias, padding=width - 1, groups=x.shape[1])[..., : x.shape[-1]]
    return F.silu(out)


results = []
torch.manual_seed(0)
for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
    for width in (2, 3, 4):
        x = torch.randn(2, 64, 512, device="cuda", dtype=dtype)
        w = torch.randn(64, width, device="cuda", dtype=dtype)
        b = torch.randn(64, device="cuda", dtype=dtype)
        got = causal_conv1d_fn(x, w, b, activation="silu")
        torch.cuda.synchronize()
        ref = reference(x.float(), w.float(), b.float())
        err = (got.float() - ref).abs().max().item()
        scale = ref.abs().max().item()
        results.append({"dtype": str(dtype), "width": width, "max_abs_err": err, "ref_max_abs": scale,
                        "tolerance": tol * max(1.0, scale), "ok": err <= tol * max(1.0, scale)})
print(json.dumps({"device": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability(0)),
                  "checks": results}, indent=1))
sys.exit(0 if all(r["ok"] for r in results) else 1)
