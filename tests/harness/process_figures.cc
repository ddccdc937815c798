#include "process_figures.h"

#include <filesystem>
#include <fstream>
#include <string>

namespace gpupool::e2e {

ProcessFigures figuresOf(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  ProcessFigures figures;
  std::ifstream status(dir + "/status");
  for (std::string key; status >> key;) {
    if (key == "Threads:") status >> figures.threads;
    if (key == "VmRSS:") status >> figures.rssKiB;
  }
  std::error_code ec;
  figures.descriptors = 0;
  for (std::filesystem::directory_iterator it(dir + "/fd", ec), end; !ec && it != end;
       it.increment(ec))
    ++figures.descriptors;
  figures.deviceThreads = 0;
  for (std::filesystem::directory_iterator it(dir + "/task", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream comm(it->path() / "comm");
    std::string name;
    if (std::getline(comm, name) && name == "emu-stream") ++figures.deviceThreads;
  }
  return figures;
}

}  // namespace gpupool::e2e
