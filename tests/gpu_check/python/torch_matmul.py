# PyTorch matrix multiplication (cuBLAS) in fp32, fp16 and bf16 against float64 on the CPU.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(1)
a = torch.randn(512, 384, dtype=torch.float64)
b = torch.randn(384, 640, dtype=torch.float64)

for dtype, tolerance in ((torch.float32, 1e-4), (torch.float16, 2e-2), (torch.bfloat16, 1e-1)):
    a_low, b_low = a.to(dtype), b.to(dtype)
    want = a_low.double() @ b_low.double()
    got = (a_low.cuda() @ b_low.cuda()).double().cpu()
    error = ((got - want).abs().max() / want.abs().max()).item()
    check(error < tolerance,
          "%s matmul 512x384x640: max error %.2e of the largest entry" % (dtype, error))

batch = torch.randn(8, 64, 32)
other = torch.randn(8, 32, 48)
got = torch.bmm(batch.cuda(), other.cuda()).cpu()
check(torch.allclose(got, torch.bmm(batch, other), rtol=1e-4, atol=1e-4), "batched bmm 8x64x32x48")
passed()
