// Texture and surface references of modules (client/texture_reference_api.cc), as the launch path
// and module unloading need them.
#pragma once

#include <cuda.h>

#include "driver_state.h"

namespace gpupool::client {

// Before a launch of `f`: binds on the server each reference of f's module whose state changed
// since it was last bound, so the launch reads the bindings set before it (and later changes only
// later launches), and, once, has the server check that every reference f uses is bound (the
// launch itself is posted, and would report that only later). Errors are the binding's, e.g. a
// destroyed array, or the unbound reference's.
CUresult bindTextureReferences(FunctionObject* f);

// Whether h is a live texture reference; *module is its module (null: made by cuTexRefCreate).
bool textureReferenceModule(CUtexref h, ModuleObject** module);

// Forgets m's references (cuModuleUnload); their handles become invalid.
void forgetTextureReferences(ModuleObject* m);

}  // namespace gpupool::client
