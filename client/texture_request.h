// A texture or surface description as a TextureOp request carries it: one encoding for texture
// objects (texture_api.cc) and for texture reference bindings (texture_reference_api.cc).
#pragma once

#include "common/texture_descriptor.h"
#include "protocol/gpupool.capnp.h"

namespace gpupool::client {

inline void setTextureDescription(gpupool::wire::Request::TextureOp::Builder m,
                                  const TextureDescription& d) {
  m.setSurface(d.surface);
  m.setResourceType(d.resourceType);
  m.setHandle(d.handle);
  m.setFormat(d.format);
  m.setChannels(d.channels);
  m.setWidth(d.width);
  m.setHeight(d.height);
  m.setPitchBytes(d.pitchBytes);
  m.setSizeBytes(d.sizeBytes);
  auto modes = m.initAddressMode(3);
  for (unsigned i = 0; i < 3; ++i) modes.set(i, d.addressMode[i]);
  m.setFilterMode(d.filterMode);
  m.setFlags(d.flags);
  auto border = m.initBorderColor(4);
  for (unsigned i = 0; i < 4; ++i) border.set(i, d.borderColor[i]);
  m.setMipmapFilterMode(d.mipmapFilterMode);
  m.setMipmapLevelBias(d.mipmapLevelBias);
  m.setMinMipmapLevelClamp(d.minMipmapLevelClamp);
  m.setMaxMipmapLevelClamp(d.maxMipmapLevelClamp);
  m.setMaxAnisotropy(d.maxAnisotropy);
}

}  // namespace gpupool::client
