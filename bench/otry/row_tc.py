"""row_tc.py [layernorm|rmsnorm|rowsum]: torch.compile's kernel for the 16384x4096 f32 case of
bench/auto, run a few times (for ncu -k regex:triton from a device request; bench/otry/row_*)."""
import sys
import torch
import torch.nn.functional as F

x = torch.randn(16384, 4096, device="cuda")
g = torch.randn(4096, device="cuda")
b = torch.randn(4096, device="cuda")
fns = {
    "layernorm": lambda x: F.layer_norm(x, (4096,), g, b, 1e-5),
    "rmsnorm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g,
    "rowsum": lambda x: x.sum(-1),
}
f = torch.compile(fns[sys.argv[1] if len(sys.argv) > 1 else "layernorm"])
for _ in range(3):
    f(x)
torch.cuda.synchronize()
