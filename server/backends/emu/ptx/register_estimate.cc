#include "register_estimate.h"

#include <algorithm>
#include <vector>

namespace gpupool::ptx {

namespace {

// Past this many (instruction, register) pairs the liveness sets would take too much memory to
// compute at load time; such a function is assumed to need every register it declares.
constexpr uint64_t kMaxLivenessBits = uint64_t{1} << 26;

// bar's ops[0] is bar.red's destination, or none for the other forms.
bool hasDestination(Op op) {
  switch (op) {
    case Op::kSt:
    case Op::kRed:
    case Op::kBra:
    case Op::kRet:
    case Op::kExit:
    case Op::kCall:
    case Op::kBarWarpSync:
    case Op::kMembar:
    case Op::kTrap:
    case Op::kNop:
    case Op::kCpAsync:
    case Op::kBulkCopy:
    case Op::kSust:  // ops[0] is the data stored
      return false;
    default:
      return true;
  }
}

class RegisterSet {
 public:
  explicit RegisterSet(uint32_t registers) : words_((registers + 63) / 64, 0) {}
  void insert(uint32_t r) { words_[r / 64] |= uint64_t{1} << (r % 64); }
  void erase(uint32_t r) { words_[r / 64] &= ~(uint64_t{1} << (r % 64)); }
  // this |= other; true when that added something.
  bool merge(const RegisterSet& other) {
    bool grew = false;
    for (size_t i = 0; i < words_.size(); ++i) {
      const uint64_t merged = words_[i] | other.words_[i];
      grew |= merged != words_[i];
      words_[i] = merged;
    }
    return grew;
  }
  template <typename Visit>
  void forEach(Visit visit) const {
    for (size_t i = 0; i < words_.size(); ++i) {
      for (uint64_t w = words_[i]; w != 0; w &= w - 1) {
        visit(static_cast<uint32_t>(i * 64 + __builtin_ctzll(w)));
      }
    }
  }
  bool operator==(const RegisterSet&) const = default;

 private:
  std::vector<uint64_t> words_;
};

// The registers one instruction reads and the ones it writes.
struct Access {
  std::vector<uint32_t> uses, defs;
};

void addRegisters(const ModuleImage& image, const Operand& o, std::vector<uint32_t>* out) {
  switch (o.kind) {
    case OperandKind::kReg:
      out->push_back(o.index);
      break;
    case OperandKind::kAddress:
      if (o.symbol == SymbolKind::kNone && o.index != Operand::kNoReg) out->push_back(o.index);
      break;
    case OperandKind::kVector:
      for (uint32_t k = 0; k < o.count; ++k)
        addRegisters(image, image.vectorElements[o.index + k], out);
      break;
    default:
      break;
  }
}

Access accessOf(const ModuleImage& image, const Instr& in) {
  Access a;
  const bool writes = hasDestination(in.op);
  for (uint8_t i = 0; i < in.numOps; ++i)
    addRegisters(image, in.ops[i], i == 0 && writes ? &a.defs : &a.uses);
  if (writes && in.ops[5].kind == OperandKind::kReg) a.defs.push_back(in.ops[5].index);
  if (in.guard != Operand::kNoReg) a.uses.push_back(in.guard);
  return a;
}

}  // namespace

uint32_t maxLiveRegisterUnits(const ModuleImage& image, uint32_t function) {
  const FunctionImage& f = image.functions[function];
  const uint32_t count = f.endPc - f.entryPc;
  auto unitsOf = [&](const RegisterSet& set) {
    uint32_t units = 0;
    set.forEach([&](uint32_t r) { units += f.regUnits[r]; });
    return units;
  };
  if (uint64_t{count} * f.numRegs > kMaxLivenessBits) {
    uint32_t units = 0;
    for (uint8_t u : f.regUnits) units += u;
    return units;
  }
  std::vector<Access> access(count);
  for (uint32_t i = 0; i < count; ++i) access[i] = accessOf(image, image.code[f.entryPc + i]);
  // Backward dataflow over the instruction graph until nothing changes: live-in = uses plus
  // live-out minus what an unconditional write kills.
  std::vector<RegisterSet> liveIn(count, RegisterSet(f.numRegs));
  std::vector<RegisterSet> liveOut(count, RegisterSet(f.numRegs));
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = count; i-- > 0;) {
      const Instr& in = image.code[f.entryPc + i];
      RegisterSet out(f.numRegs);
      const bool ends = in.op == Op::kRet || in.op == Op::kExit || in.op == Op::kTrap;
      const bool jumps = in.op == Op::kBra;
      if (!ends && !(jumps && in.guard == Operand::kNoReg) && i + 1 < count)
        out.merge(liveIn[i + 1]);
      if (jumps && in.ops[0].index >= f.entryPc && in.ops[0].index < f.endPc) {
        out.merge(liveIn[in.ops[0].index - f.entryPc]);
      }
      RegisterSet live = out;
      if (in.guard == Operand::kNoReg) {
        for (uint32_t r : access[i].defs) live.erase(r);
      }
      for (uint32_t r : access[i].uses) live.insert(r);
      if (!(live == liveIn[i]) || !(out == liveOut[i])) {
        changed = true;
        liveIn[i] = std::move(live);
        liveOut[i] = std::move(out);
      }
    }
  }
  uint32_t most = 0;
  for (uint32_t i = 0; i < count; ++i) {
    // What is written is held together with whatever stays live past the instruction.
    RegisterSet held = liveOut[i];
    for (uint32_t r : access[i].defs) held.insert(r);
    most = std::max({most, unitsOf(liveIn[i]), unitsOf(held)});
  }
  return most;
}

uint32_t estimatedRegisters(uint32_t liveUnits) {
  const uint32_t rounded = (liveUnits + kRegisterEstimateGranularity - 1) /
                           kRegisterEstimateGranularity * kRegisterEstimateGranularity;
  return std::clamp(rounded, kMinEstimatedRegisters, kMaxRegistersPerThread);
}

}  // namespace gpupool::ptx
