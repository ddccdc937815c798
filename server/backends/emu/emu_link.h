// The emu's linker: cuLinkComplete on the emu merges the PTX of every input into one PTX module.
//
// Each input contributes PTX text: PTX itself, or the PTX a fatbin (also one embedded in a host
// object or a static library member) carries for the device. The texts become one module under a
// single .version/.target header: `.extern` declarations of symbols another input defines are
// dropped, two definitions of one exported symbol are an error, internal symbols that would
// collide are renamed, and an extern left undefined is an error naming it (as nvlink reports it).
// The result is NUL-terminated PTX text, which moduleLoad loads like any PTX image.
#pragma once

#include <span>
#include <utility>

#include "server/backend.h"

namespace gpupool::server {

// `deviceCapability` is major*10+minor (it picks a fatbin's PTX). `verbose` (CU_JIT_LOG_VERBOSE)
// adds a line per input and per kernel to the info log.
void emuLink(std::span<const LinkInput> inputs, int deviceCapability, bool verbose,
             LinkOutcome* outcome);

// cuLinkAddData's check of one input: its PTX must load on its own once its externs are given
// stand-in definitions (so syntax errors and unsupported instructions surface here, as ptxas
// reports them when the driver adds PTX); inputs without usable PTX fail as emuLink would.
void emuCheckLinkInput(const LinkInput& input, int deviceCapability, LinkOutcome* outcome);

}  // namespace gpupool::server
