"""A steady GPU load for SECONDS (bf16 matmuls), for bench/gpu/node_health.yml's sampling."""
import sys
import time

import torch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + seconds
n = 0
while time.time() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    n += 20
print("matmuls", n)
