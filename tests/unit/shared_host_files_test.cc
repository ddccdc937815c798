// The server's store of client pinned memory shared as memory files (server/shared_host_files.h):
// only a sealed, fully allocated memory file of the announced size is mapped; ranges outside a
// file, unknown files and reused ids are refused with a reason; a range still held keeps its
// mapping after the file is released; where a file is mapped into device addresses is kept for
// its release.
#include "server/shared_host_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace gpupool::server {
namespace {

using transport::FileDescriptor;

constexpr uint64_t kBytes = 2 * 4096;

// A memory file as the client library makes one, minus what `omit` leaves out.
enum Omit { kNothing = 0, kSeals = 1, kAllocation = 2 };
FileDescriptor clientFile(uint64_t bytes = kBytes, int omit = kNothing) {
  FileDescriptor file(::memfd_create("gpupool-pinned", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_GE(file.get(), 0);
  EXPECT_EQ(::ftruncate(file.get(), static_cast<off_t>(bytes)), 0);
  if (!(omit & kAllocation)) {
    EXPECT_EQ(::fallocate(file.get(), 0, 0, static_cast<off_t>(bytes)), 0);
  }
  if (!(omit & kSeals)) {
    EXPECT_EQ(::fcntl(file.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  }
  return file;
}

FileDescriptor duplicate(const FileDescriptor& file) { return FileDescriptor(::dup(file.get())); }

void expectRefused(const Status& st, const std::string& why) {
  EXPECT_EQ(st.code, CUDA_ERROR_INVALID_VALUE) << st.message;
  EXPECT_NE(st.message.find(why), std::string::npos) << st.message;
}

TEST(SharedHostFilesTest, MapsTheClientsFileBothWays) {
  SharedHostFiles files;
  FileDescriptor file = clientFile();
  ASSERT_EQ(::pwrite(file.get(), "client wrote", 12, 4096), 12);
  Status st = files.share(7, kBytes, duplicate(file));
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(files.count(), 1u);
  EXPECT_EQ(files.totalBytes(), kBytes);

  SharedHostFiles::Range range;
  ASSERT_TRUE(files.find(7, 4096, 12, "test", &range).ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(range.data), 12), "client wrote");
  std::memcpy(range.data, "server wrote", 12);
  char back[12];
  ASSERT_EQ(::pread(file.get(), back, 12, 4096), 12);
  EXPECT_EQ(std::string(back, 12), "server wrote");
  // The whole file, and an empty range at its end, are inside it.
  EXPECT_TRUE(files.find(7, 0, kBytes, "test", &range).ok());
  EXPECT_TRUE(files.find(7, kBytes, 0, "test", &range).ok());
}

TEST(SharedHostFilesTest, RefusesWhatIsNotAClientsPinnedMemory) {
  SharedHostFiles files;
  expectRefused(files.share(1, kBytes, FileDescriptor()), "no memory file came");
  expectRefused(files.share(0, kBytes, clientFile()), "file id 0");
  expectRefused(files.share(1, 100, clientFile()), "not whole pages");
  expectRefused(files.share(1, kBytes, clientFile(kBytes * 2)), "not " + std::to_string(kBytes));
  // Unsealed, it could shrink under the mapping (SIGBUS in the server).
  expectRefused(files.share(1, kBytes, clientFile(kBytes, kSeals)), "not sealed");
  // With holes, the server's own writes would allocate its pages.
  expectRefused(files.share(1, kBytes, clientFile(kBytes, kAllocation)), "not all allocated");
  int pipeEnds[2];
  ASSERT_EQ(::pipe(pipeEnds), 0);
  FileDescriptor readEnd(pipeEnds[0]), writeEnd(pipeEnds[1]);
  expectRefused(files.share(1, kBytes, std::move(readEnd)), "not a memory file");
  EXPECT_EQ(files.count(), 0u);

  ASSERT_TRUE(files.share(1, kBytes, clientFile()).ok());
  expectRefused(files.share(1, kBytes, clientFile()), "in use");
  EXPECT_EQ(files.count(), 1u);
}

TEST(SharedHostFilesTest, RangesOutsideAFileAndUnknownFilesAreRefused) {
  SharedHostFiles files;
  ASSERT_TRUE(files.share(3, kBytes, clientFile()).ok());
  SharedHostFiles::Range range;
  expectRefused(files.find(4, 0, 1, "host-to-device copy", &range),
                "host-to-device copy: no shared host file 4");
  expectRefused(files.find(3, kBytes - 1, 2, "copy", &range), "lie outside");
  expectRefused(files.find(3, kBytes + 1, 0, "copy", &range), "lie outside");
  // offset + bytes wraps around 2^64: still outside.
  expectRefused(files.find(3, 4096, UINT64_MAX - 100, "copy", &range), "lie outside");
  EXPECT_EQ(range.data, nullptr);
}

TEST(SharedHostFilesTest, AReleasedFileStaysMappedForARangeStillHeld) {
  SharedHostFiles files;
  FileDescriptor file = clientFile();
  ASSERT_TRUE(files.share(9, kBytes, duplicate(file)).ok());
  SharedHostFiles::Range held;
  ASSERT_TRUE(files.find(9, 0, kBytes, "copy", &held).ok());
  ASSERT_TRUE(files.release(9).ok());
  EXPECT_EQ(files.count(), 0u);
  EXPECT_EQ(files.totalBytes(), 0u);
  SharedHostFiles::Range range;
  expectRefused(files.find(9, 0, 1, "copy", &range), "no shared host file 9");
  expectRefused(files.release(9), "no shared host file 9");
  // The copy that held it finishes against live memory.
  std::memcpy(held.data, "still here", 10);
  char back[10];
  ASSERT_EQ(::pread(file.get(), back, 10, 0), 10);
  EXPECT_EQ(std::string(back, 10), "still here");
  // Released, the id may name a new file.
  EXPECT_TRUE(files.share(9, kBytes, clientFile()).ok());
}

// Where a file is also mapped into device addresses is kept with it, once, and handed back at
// release for the caller to undo; its descriptor stays usable for mapping while it is shared.
TEST(SharedHostFilesTest, KeepsWhereAFileIsMappedIntoDeviceAddresses) {
  SharedHostFiles files;
  ASSERT_TRUE(files.share(5, kBytes, clientFile()).ok());
  std::shared_ptr<int> memfd;
  uint64_t bytes = 0;
  ASSERT_TRUE(files.descriptor(5, &memfd, &bytes).ok());
  EXPECT_EQ(bytes, kBytes);
  ASSERT_TRUE(memfd);
  struct stat st {};
  ASSERT_EQ(::fstat(*memfd, &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kBytes);
  expectRefused(files.descriptor(6, &memfd, &bytes), "no shared host file 6");

  ASSERT_TRUE(files.noteDeviceMapping(5, {3, 0x7000000000, kBytes}).ok());
  expectRefused(files.noteDeviceMapping(5, {3, 0x7000100000, kBytes}), "already");
  expectRefused(files.noteDeviceMapping(6, {3, 0x7000100000, kBytes}), "no shared host file 6");

  SharedHostFiles::DeviceMapping unmap;
  ASSERT_TRUE(files.release(5, &unmap).ok());
  EXPECT_EQ(unmap.context, 3u);
  EXPECT_EQ(unmap.address, 0x7000000000u);
  EXPECT_EQ(unmap.bytes, kBytes);
  // The descriptor handed out before stays open for its holder.
  EXPECT_EQ(::fstat(*memfd, &st), 0);

  // A file never mapped into device addresses hands back nothing to undo.
  ASSERT_TRUE(files.share(8, kBytes, clientFile()).ok());
  SharedHostFiles::DeviceMapping none{1, 2, 3};
  ASSERT_TRUE(files.release(8, &none).ok());
  EXPECT_EQ(none.context, 0u);
}

}  // namespace
}  // namespace gpupool::server
