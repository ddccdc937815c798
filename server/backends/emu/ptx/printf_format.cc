#include "printf_format.h"

#include <cstdio>
#include <cstring>

namespace gpupool::ptx {

std::string formatDevicePrintf(std::string_view fmt, const PrintfArguments& args) {
  std::string out;
  uint64_t offset = 0;
  auto fetch = [&](uint64_t size, void* dst) {
    offset = (offset + size - 1) / size * size;  // natural alignment
    bool ok = args.read && args.read(offset, dst, size);
    offset += size;
    if (!ok) std::memset(dst, 0, size);
    return ok;
  };
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    size_t start = i++;
    if (i < fmt.size() && fmt[i] == '%') {
      out += '%';
      ++i;
      continue;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i])) spec += fmt[i++];
    auto number = [&]() {
      if (i < fmt.size() && fmt[i] == '*') {
        int32_t v = 0;
        fetch(4, &v);
        spec += std::to_string(v);
        ++i;
        return;
      }
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') spec += fmt[i++];
    };
    number();
    if (i < fmt.size() && fmt[i] == '.') {
      spec += fmt[i++];
      number();
    }
    int longness = 0;  // 0 = int, 1 = long (8 bytes on LP64), 2 = long long
    while (i < fmt.size() && std::strchr("hlzjtL", fmt[i])) {
      char m = fmt[i++];
      if (m == 'l') ++longness;
      if (m == 'z' || m == 'j' || m == 't') longness = 2;
    }
    if (i >= fmt.size()) {
      out.append(fmt.substr(start));
      break;
    }
    char conv = fmt[i++];
    char buf[512];
    switch (conv) {
      case 'd':
      case 'i': {
        long long v;
        if (longness) {
          int64_t x;
          fetch(8, &x);
          v = x;
        } else {
          int32_t x;
          fetch(4, &x);
          v = x;
        }
        snprintf(buf, sizeof buf, (spec + "lld").c_str(), v);
        out += buf;
        break;
      }
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        unsigned long long v;
        if (longness) {
          uint64_t x;
          fetch(8, &x);
          v = x;
        } else {
          uint32_t x;
          fetch(4, &x);
          v = x;
        }
        snprintf(buf, sizeof buf, (spec + "ll" + conv).c_str(), v);
        out += buf;
        break;
      }
      case 'c': {
        int32_t x;
        fetch(4, &x);
        snprintf(buf, sizeof buf, (spec + "c").c_str(), x);
        out += buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
      case 'a':
      case 'A': {
        double d;
        fetch(8, &d);
        snprintf(buf, sizeof buf, (spec + conv).c_str(), d);
        out += buf;
        break;
      }
      case 'p': {
        uint64_t p;
        fetch(8, &p);
        snprintf(buf, sizeof buf, (spec + "s").c_str(),
                 ("0x" +
                  [&] {
                    char h[32];
                    snprintf(h, sizeof h, "%llx", static_cast<unsigned long long>(p));
                    return std::string(h);
                  }())
                     .c_str());
        out += buf;
        break;
      }
      case 's': {
        uint64_t p;
        fetch(8, &p);
        std::string s;
        if (p == 0)
          s = "(null)";
        else if (!args.readString || !args.readString(p, &s))
          s = "<bad string>";
        std::string text;
        text.resize(s.size() + 600);
        int n = snprintf(text.data(), text.size(), (spec + "s").c_str(), s.c_str());
        text.resize(n > 0 ? std::min<size_t>(n, text.size() - 1) : 0);
        out += text;
        break;
      }
      default:  // unknown conversion: print it verbatim, consume nothing
        out.append(fmt.substr(start, i - start));
        break;
    }
  }
  return out;
}

}  // namespace gpupool::ptx
