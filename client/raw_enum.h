// An enum value as the application passed it. A caller may hand the driver any number where an
// enum is expected (an attribute id newer than this driver, or garbage); reading it through the
// enum type is undefined when the number is not one of its values, so it is read as an int and
// compared against the enumerators.
#pragma once

#include <cstring>
#include <type_traits>

namespace gpupool::client {

template <typename Enum>
int rawEnumValue(const Enum& value) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(int));
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

}  // namespace gpupool::client
