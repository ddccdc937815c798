# The caching allocator's statistics and the device's free memory follow allocations.
# gpu-check: requires torch
from _gpucheck import check, passed, require_torch_gpu

torch = require_torch_gpu()
torch.cuda.empty_cache()
torch.cuda.reset_peak_memory_stats()
base = torch.cuda.memory_allocated()
free_before, total = torch.cuda.mem_get_info()
check(0 < free_before <= total, "mem_get_info: %d of %d bytes free" % (free_before, total))
size = 256 << 20
block = torch.empty(size, dtype=torch.uint8, device="cuda")
block.fill_(7)
check(torch.cuda.memory_allocated() - base >= size, "memory_allocated grew by the 256 MiB block")
check(torch.cuda.max_memory_allocated() >= base + size, "max_memory_allocated saw the block")
free_during, _ = torch.cuda.mem_get_info()
check(free_before - free_during >= size, "the device's free memory fell by at least 256 MiB")
del block
check(torch.cuda.memory_allocated() == base, "memory_allocated is back after del")
check(torch.cuda.memory_reserved() >= size, "the cache keeps the block reserved")
torch.cuda.empty_cache()
check(torch.cuda.memory_reserved() < size, "empty_cache released it")
stats = torch.cuda.memory_stats()
check(stats.get("num_alloc_retries", 0) == 0 and stats["allocation.all.allocated"] >= 1,
      "memory_stats counts the allocation")
passed()
