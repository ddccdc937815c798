// Pitched allocations and 2D copies: cudaMallocPitch, cudaMemcpy2D host->device, device->device
// (into a column offset) and device->host with odd widths, heights and host pitches, and
// cudaMemset2D on a sub-rectangle. Checks every byte, including the padding that must not change.
#include <cstdint>
#include <vector>

#include "self_check.h"

namespace {

constexpr unsigned char kPad = 0x6B;

unsigned char cell(size_t row, size_t column, unsigned seed) {
  return static_cast<unsigned char>(row * 131 + column * 7 + seed * 29 + (column >> 8));
}

struct Shape {
  size_t width;   // bytes per row
  size_t height;  // rows
  size_t hostPitch;
};

// A pitched device allocation of `height` rows of at least `width` bytes, filled with kPad.
struct Pitched {
  unsigned char* device = nullptr;
  size_t pitch = 0;
  size_t width = 0;
  size_t height = 0;

  Pitched(size_t w, size_t h) : width(w), height(h) {
    CHECK_CUDA(cudaMallocPitch(reinterpret_cast<void**>(&device), &pitch, width, height));
    CHECK(pitch >= width, "cudaMallocPitch gave pitch %zu for width %zu", pitch, width);
    CHECK_CUDA(cudaMemset(device, kPad, pitch * height));
  }
  ~Pitched() { cudaFree(device); }

  // The whole allocation, rows of `pitch` bytes.
  std::vector<unsigned char> read() const {
    std::vector<unsigned char> host(pitch * height);
    CHECK_CUDA(cudaMemcpy(host.data(), device, host.size(), cudaMemcpyDeviceToHost));
    return host;
  }
};

void copyShape(const Shape& shape, unsigned seed) {
  const size_t column = 3;  // odd byte offset of the device-to-device destination
  std::vector<unsigned char> host(shape.hostPitch * shape.height, kPad);
  for (size_t r = 0; r < shape.height; ++r) {
    for (size_t c = 0; c < shape.width; ++c) host[r * shape.hostPitch + c] = cell(r, c, seed);
  }

  Pitched first(shape.width, shape.height);
  Pitched second(shape.width + column, shape.height + 1);
  CHECK_CUDA(cudaMemcpy2D(first.device, first.pitch, host.data(), shape.hostPitch, shape.width,
                          shape.height, cudaMemcpyHostToDevice));
  // Into `second` one row down and `column` bytes right.
  unsigned char* target = second.device + second.pitch + column;
  CHECK_CUDA(cudaMemcpy2D(target, second.pitch, first.device, first.pitch, shape.width,
                          shape.height, cudaMemcpyDeviceToDevice));

  // The device image of `second`: the copied rectangle and padding everywhere else.
  const std::vector<unsigned char> image = second.read();
  for (size_t r = 0; r < second.height; ++r) {
    for (size_t c = 0; c < second.pitch; ++c) {
      const bool inside = r >= 1 && c >= column && c < column + shape.width;
      const unsigned char expected = inside ? cell(r - 1, c - column, seed) : kPad;
      CHECK(image[r * second.pitch + c] == expected,
            "D2D %zux%zu: device byte (%zu,%zu) is 0x%02x, expected 0x%02x", shape.width,
            shape.height, r, c, image[r * second.pitch + c], expected);
    }
  }

  // Back to the host with a different pitch; the host padding must stay.
  const size_t backPitch = shape.width + 5;
  std::vector<unsigned char> back(backPitch * shape.height, kPad);
  CHECK_CUDA(cudaMemcpy2D(back.data(), backPitch, target, second.pitch, shape.width, shape.height,
                          cudaMemcpyDeviceToHost));
  for (size_t r = 0; r < shape.height; ++r) {
    for (size_t c = 0; c < backPitch; ++c) {
      const unsigned char expected = c < shape.width ? cell(r, c, seed) : kPad;
      CHECK(back[r * backPitch + c] == expected,
            "D2H %zux%zu: host byte (%zu,%zu) is 0x%02x, expected 0x%02x", shape.width,
            shape.height, r, c, back[r * backPitch + c], expected);
    }
  }

  // cudaMemcpyDefault works on 2D copies too.
  std::vector<unsigned char> viaDefault(shape.width * shape.height, 0);
  CHECK_CUDA(cudaMemcpy2D(viaDefault.data(), shape.width, first.device, first.pitch, shape.width,
                          shape.height, cudaMemcpyDefault));
  for (size_t r = 0; r < shape.height; ++r) {
    for (size_t c = 0; c < shape.width; ++c) {
      CHECK(viaDefault[r * shape.width + c] == cell(r, c, seed),
            "cudaMemcpyDefault 2D %zux%zu: byte (%zu,%zu) wrong", shape.width, shape.height, r, c);
    }
  }
  std::printf("memcpy2d width=%zu height=%zu host_pitch=%zu device_pitch=%zu ok\n", shape.width,
              shape.height, shape.hostPitch, first.pitch);
}

void memset2d(size_t width, size_t height) {
  Pitched buffer(width + 4, height + 2);
  const size_t column = 1, row = 1;
  CHECK_CUDA(
      cudaMemset2D(buffer.device + row * buffer.pitch + column, buffer.pitch, 0x2D, width, height));
  const std::vector<unsigned char> image = buffer.read();
  for (size_t r = 0; r < buffer.height; ++r) {
    for (size_t c = 0; c < buffer.pitch; ++c) {
      const bool inside = r >= row && r < row + height && c >= column && c < column + width;
      const unsigned char expected = inside ? 0x2D : kPad;
      CHECK(image[r * buffer.pitch + c] == expected,
            "cudaMemset2D %zux%zu: byte (%zu,%zu) is 0x%02x, expected 0x%02x", width, height, r, c,
            image[r * buffer.pitch + c], expected);
    }
  }
  std::printf("memset2d width=%zu height=%zu pitch=%zu ok\n", width, height, buffer.pitch);
}

}  // namespace

int main() {
  const Shape shapes[] = {{1, 1, 1}, {37, 19, 53}, {1000, 3, 1001}, {4097, 5, 4099}, {3, 257, 8}};
  unsigned seed = 1;
  for (const Shape& shape : shapes) copyShape(shape, seed++);
  memset2d(1, 1);
  memset2d(33, 17);
  memset2d(1023, 4);
  return pass();
}
