// Finding the server-side function behind a CUfunction or CUkernel handle in a given context
// (module_api.cc); the launch path uses it.
#pragma once

#include <string>

#include "driver_state.h"

namespace gpupool::client {

// The function `name` of module m, fetched from the server (with its parameter layout and
// attributes) on first use and cached.
CUresult functionIn(ModuleObject* m, const std::string& name, FunctionObject** out);
// `h` as a function in `ctx`: a CUfunction as is; a CUkernel loaded into ctx (or, when ctx is null,
// into the current context or device 0's primary context).
CUresult resolveFunction(CUfunction h, ContextObject* ctx, FunctionObject** out);
// The library's module in `ctx`, loaded there on first use.
CUresult libraryModuleIn(LibraryObject* lib, ContextObject* ctx, ModuleObject** out);
// The context cuLibrary* calls use: the current one, or device 0's primary context, made remote.
CUresult contextForLibraryUse(ContextObject** ctx);

}  // namespace gpupool::client
