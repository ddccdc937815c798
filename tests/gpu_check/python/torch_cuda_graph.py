# CUDA graph capture and replay: a captured sequence replays on new input data.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
torch.manual_seed(4)
weight = torch.randn(128, 128, device="cuda")
static_in = torch.randn(64, 128, device="cuda")

def step(x):
    return torch.relu(x @ weight).sum(dim=1) * 0.5 + 1.0

stream = torch.cuda.Stream()
stream.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(stream):
    for _ in range(3):  # warm-up outside the capture, as the PyTorch documentation asks
        step(static_in)
torch.cuda.current_stream().wait_stream(stream)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    static_out = step(static_in)

for trial in range(5):
    data = torch.randn(64, 128, device="cuda")
    static_in.copy_(data)
    graph.replay()
    torch.cuda.synchronize()
    check(torch.allclose(static_out, step(data), rtol=1e-5, atol=1e-5),
          "replay %d matches eager" % trial)
passed()
