# A cuDNN convolution, forward and backward, against the CPU.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu, skip

torch = require_torch_gpu()
if not torch.backends.cudnn.is_available():
    skip("torch.backends.cudnn.is_available() is False")
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(2)
conv = torch.nn.Conv2d(8, 16, kernel_size=3, padding=1)
x = torch.randn(4, 8, 32, 32, requires_grad=True)
y = conv(x)
y.square().sum().backward()
cpu_grad_w, cpu_grad_x = conv.weight.grad.clone(), x.grad.clone()

conv_gpu = conv.cuda()
conv_gpu.zero_grad()
x_gpu = x.detach().cuda().requires_grad_(True)
y_gpu = conv_gpu(x_gpu)
y_gpu.square().sum().backward()
check(torch.allclose(y_gpu.detach().cpu(), y.detach(), rtol=1e-4, atol=1e-4),
      "forward matches the CPU")
check(torch.allclose(conv_gpu.weight.grad.cpu(), cpu_grad_w, rtol=1e-3, atol=1e-3),
      "weight gradient matches")
check(torch.allclose(x_gpu.grad.cpu(), cpu_grad_x, rtol=1e-3, atol=1e-3),
      "input gradient matches")
print("cudnn version %s" % torch.backends.cudnn.version())
passed()
