// Every function nvml.h declares resolves in build/lib/libnvidia-ml.so.1 (the list is the one the
// generator emits from the header), and the library exports nothing but nvml* names' functions.
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LIBNVIDIA_ML NAMES_TXT\n", argv[0]);
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  std::ifstream names(argv[2]);
  std::string name;
  int count = 0, missing = 0;
  while (std::getline(names, name)) {
    if (name.empty()) continue;
    ++count;
    if (!dlsym(library, name.c_str())) {
      std::fprintf(stderr, "missing: %s\n", name.c_str());
      ++missing;
    }
  }
  // A name nvml.h does not declare is not exported (the version script's nvml* aside, the
  // library's C++ internals stay hidden).
  if (dlsym(library, "_ZN7gpupool4nvml11initLibraryEv")) {
    std::fprintf(stderr, "internal symbol exported\n");
    ++missing;
  }
  std::printf("%d NVML functions, %d missing\n", count, missing);
  return count > 200 && missing == 0 ? 0 : 1;
}
