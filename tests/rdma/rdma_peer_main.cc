// A peer process for the failure tests: it gets to a given stage of a conversation, says so on
// stdout, and then waits to be killed. A separate program (not a fork) so the dying peer owns all
// of its verbs resources and the kernel tears its connection down as it would for a crashed client.
//
//   rdma_peer idle URL            connect, then wait
//   rdma_peer send-bulk URL SIZE  connect, send one frame with SIZE pageable bulk bytes, then wait
//   rdma_peer recv-frame URL      connect, receive one frame but never its bulk, then wait
//   rdma_peer offer URL SIZE      connect, offer a pinned SIZE-byte destination for the reply's
//                                 bulk (expectBulkInto), send a request, then wait
//   rdma_peer serve ADDR          listen (prints the URL), accept, receive one frame, then wait
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/rdma/rdma_pair.h"

using namespace gpupool::transport;

namespace {

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

[[noreturn]] void waitToBeKilled() {
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: rdma_peer ROLE URL|ADDR [SIZE]\n");
    return 2;
  }
  std::string role = argv[1];
  try {
    if (role == "serve") {
      auto listener = rdmaListen(Endpoint{"rdma", argv[2], 0});
      say(listener->url());
      auto connection = listener->accept();
      connection->receiveFrame();
      say("got-frame");
      waitToBeKilled();
    }
    auto connection = rdmaConnect(testing::endpointOf(argv[2]), 10000);
    say("connected");
    if (role == "send-bulk" && argc > 3) {
      std::vector<std::byte> bulk(std::strtoull(argv[3], nullptr, 10));
      uint64_t message[2] = {1, 2};
      ConstBuffer m{message, sizeof message}, b{bulk.data(), bulk.size()};
      connection->sendFrame(std::span(&m, 1), std::span(&b, 1));
      say("sent");
    } else if (role == "offer" && argc > 3) {
      size_t size = std::strtoull(argv[3], nullptr, 10);
      void* pinned =
          mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (pinned == MAP_FAILED) throw std::runtime_error("mmap failed");
      processPinnedMemory().note(pinned, size);
      connection->expectBulkInto(pinned, size);
      uint64_t message[2] = {7, 8};
      ConstBuffer m{message, sizeof message};
      connection->sendFrame(std::span(&m, 1), {});
      say("offered");
    } else if (role == "recv-frame") {
      connection->receiveFrame();
      say("got-frame");
    } else if (role != "idle") {
      std::fprintf(stderr, "rdma_peer: unknown role %s\n", role.c_str());
      return 2;
    }
    waitToBeKilled();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma_peer %s: %s\n", role.c_str(), e.what());
    say("error");
    return 1;
  }
}
