# PyTorch tensor operations on the GPU against the same operations on the CPU: copies both ways,
# elementwise arithmetic, reductions, indexing, sorting and in-place updates.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
torch.manual_seed(0)
cpu = torch.randn(1000, 257, dtype=torch.float32)
gpu = cpu.cuda()
check(torch.equal(gpu.cpu(), cpu), "host -> device -> host copy is exact")


def close(a, b, tol=1e-5):
    return torch.allclose(a.cpu(), b, rtol=tol, atol=tol)


def formula(t):
    return t * 3.0 + t.sin() - t.exp().clamp(max=5.0)


check(close(formula(gpu), formula(cpu)), "elementwise sin/exp/clamp/arithmetic")
check(close(gpu.sum(dim=0), cpu.sum(dim=0), 1e-4), "sum over rows")
check(close(gpu.amax(dim=1), cpu.amax(dim=1)), "max over columns")
check(abs(gpu.mean().item() - cpu.mean().item()) < 1e-5, "mean of everything")
index = torch.randint(0, 1000, (300,))
check(torch.equal(gpu[index.cuda()].cpu(), cpu[index]), "gather by index")
values, _ = gpu[:, 0].sort()
check(torch.equal(values.cpu(), cpu[:, 0].sort().values), "sort")
ints = torch.arange(1 << 20, device="cuda", dtype=torch.int64)
check(ints.sum().item() == (1 << 20) * ((1 << 20) - 1) // 2, "int64 arange and sum")
gpu.add_(1.0).mul_(2.0)
check(close(gpu, (cpu + 1.0) * 2.0), "in-place add_ and mul_")
mask = gpu > 2.0
check(int(mask.sum().item()) == int(((cpu + 1.0) * 2.0 > 2.0).sum().item()), "boolean mask count")
torch.cuda.synchronize()
passed()
