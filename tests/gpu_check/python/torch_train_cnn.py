# 200 training steps of a small CNN on synthetic data a fixed teacher labels, deterministic: the
# loss must fall, and gpu-check.sh compares this run's loss curve (GPU_CHECK_ARTIFACT) with the
# other run's (native against pooled).
# gpu-check: requires torch
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
from _gpucheck import check, passed, require_torch_gpu, write_artifact  # noqa: E402

torch = require_torch_gpu()
torch.manual_seed(3)
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.use_deterministic_algorithms(True)

images = torch.randn(512, 1, 16, 16)
teacher = torch.randn(256, 4)
labels = (images.flatten(1) @ teacher).argmax(dim=1)
images, labels = images.cuda(), labels.cuda()

model = torch.nn.Sequential(
    torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 4)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
losses = []
for step in range(200):
    batch = slice((step * 64) % 512, (step * 64) % 512 + 64)
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(images[batch]), labels[batch])
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
write_artifact({"losses": losses})
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print("loss: first 10 steps %.4f, last 10 steps %.4f" % (first, last))
check(last < 0.7 * first, "the loss fell by more than 30%")
passed()
