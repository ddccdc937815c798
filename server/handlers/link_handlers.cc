// Linking (cuLinkAddData: one input checked; cuLinkComplete: the inputs the client gathered,
// linked by the backend) and module introspection (the kernels of a loaded module, for
// cuModuleEnumerateFunctions).
#include <cstring>

#include "server/handlers/request_table.h"

namespace gpupool::server {
namespace {

using wire::Request;

constexpr uint64_t kMaxLinkInputBytes = 1ull << 30;
constexpr unsigned kMaxLinkInputs = 4096;

// Bytes the reply's bulk points at; they must outlive the request, so they live in the session's
// scratch buffer.
void replyWith(RequestContext& request, const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return;
  request.session.staging.resize(bytes.size());
  std::memcpy(request.session.staging.data(), bytes.data(), bytes.size());
  request.replyBulk.push_back({request.session.staging.data(), bytes.size()});
}

// `link`, or with `checkOnly` the check of the one input cuLinkAddData adds.
Status link(RequestContext& request, BackendContext& context, Request::LinkJob::Reader job,
            bool checkOnly) {
  auto wireInputs = job.getInputs();
  if (wireInputs.size() == 0 || wireInputs.size() > kMaxLinkInputs ||
      (checkOnly && wireInputs.size() != 1)) {
    return Status::error(CUDA_ERROR_INVALID_VALUE,
                         "a link takes 1 to 4096 inputs, a check exactly one");
  }
  uint64_t total = 0;
  for (auto in : wireInputs) total += in.getBytes();
  if (total != request.bulkBytes() || total > kMaxLinkInputBytes) {
    return Status::error(CUDA_ERROR_INVALID_VALUE, "link inputs do not match the bytes sent");
  }
  std::vector<uint8_t> bytes(total);
  if (total) request.receiveBulk(bytes.data(), total);
  std::vector<LinkInput> inputs;
  uint64_t at = 0;
  for (auto in : wireInputs) {
    inputs.push_back({static_cast<CUjitInputType>(in.getType()), in.getName().cStr(),
                      std::span<const uint8_t>(bytes.data() + at, in.getBytes())});
    at += in.getBytes();
  }
  std::vector<std::pair<CUjit_option, uint64_t>> options;
  for (auto o : job.getOptions()) {
    options.emplace_back(static_cast<CUjit_option>(o.getOption()), o.getValue());
  }
  LinkOutcome outcome;
  Status st = checkOnly ? context.linkCheckInput(inputs[0], options, &outcome)
                        : context.link(inputs, options, &outcome);
  if (!st.ok()) return st;
  std::vector<uint8_t> reply(24);
  uint64_t sizes[3] = {outcome.infoLog.size(), outcome.errorLog.size(), outcome.image.size()};
  std::memcpy(reply.data(), sizes, sizeof sizes);
  reply.insert(reply.end(), outcome.infoLog.begin(), outcome.infoLog.end());
  reply.insert(reply.end(), outcome.errorLog.begin(), outcome.errorLog.end());
  reply.insert(reply.end(), outcome.image.begin(), outcome.image.end());
  replyWith(request, reply);
  request.reply.setValue(static_cast<int64_t>(outcome.result));
  return Status::success();
}

Status functionNames(RequestContext& request, BackendContext& context, uint64_t module) {
  std::vector<std::string> names;
  if (Status st = context.moduleFunctionNames(module, &names); !st.ok()) return st;
  std::vector<uint8_t> reply;
  for (const std::string& name : names) {
    reply.insert(reply.end(), name.begin(), name.end());
    reply.push_back(0);
  }
  replyWith(request, reply);
  request.reply.setValue(static_cast<int64_t>(names.size()));
  return Status::success();
}

Status moduleLink(RequestContext& request, Request::Reader r) {
  auto m = r.getModuleLink();
  return request.withContext(m.getContext(), [&](BackendContext& context) {
    switch (m.which()) {
      case Request::ModuleLink::LINK:
        return link(request, context, m.getLink(), false);
      case Request::ModuleLink::ADD_INPUT:
        return link(request, context, m.getAddInput(), true);
      case Request::ModuleLink::FUNCTION_NAMES:
        return functionNames(request, context, m.getFunctionNames());
    }
    return Status::error(CUDA_ERROR_INVALID_VALUE, "unknown module link operation");
  });
}

constexpr RequestHandlerRow kRows[] = {
    {Request::MODULE_LINK, moduleLink},
};

}  // namespace

std::span<const RequestHandlerRow> linkHandlers() { return kRows; }

}  // namespace gpupool::server
