# torch.cuda's device queries, streams and events.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
count = torch.cuda.device_count()
check(count >= 1, "device_count() = %d" % count)
props = torch.cuda.get_device_properties(0)
print("device 0: %s, compute capability %d.%d, %d SMs, %d MiB" % (
    props.name, props.major, props.minor, props.multi_processor_count, props.total_memory >> 20))
check(props.total_memory > 0 and props.multi_processor_count > 0, "properties are plausible")
check(torch.cuda.get_device_capability(0) == (props.major, props.minor), "get_device_capability")
check(torch.cuda.get_device_name(0) == props.name, "get_device_name")
check(torch.cuda.current_device() == 0, "current_device")
stream = torch.cuda.Stream()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
with torch.cuda.stream(stream):
    start.record()
    x = torch.ones(1 << 22, device="cuda")
    for _ in range(20):
        x = x * 1.0001
    end.record()
end.synchronize()
check(end.query() and stream.query(), "events and streams complete")
check(start.elapsed_time(end) >= 0.0, "event elapsed time %.3f ms" % start.elapsed_time(end))
check(abs(x[0].item() - 1.0001 ** 20) < 1e-5, "the stream's work is right")
passed()
