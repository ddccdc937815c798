# torch.compile of a small function (Inductor generates and launches Triton kernels) against eager.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
torch.manual_seed(5)

def fused(x, y):
    return torch.nn.functional.gelu(x * 1.5 + y).softmax(dim=-1) + torch.tanh(y)

compiled = torch.compile(fused)
x = torch.randn(256, 1000, device="cuda")
y = torch.randn(256, 1000, device="cuda")
for trial in range(3):
    check(torch.allclose(compiled(x, y), fused(x, y), rtol=1e-4, atol=1e-5),
          "compiled call %d matches eager" % trial)
    x = x + 0.1
passed()
