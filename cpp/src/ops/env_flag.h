// env_flag.h: an on/off switch read from the environment (benchmark knobs of the kernels).
//
//   if (EnvFlag("SINGA_DNNL_CONV_MATMUL", true)) ...   // unset or empty: true; "0": false
#pragma once

#include <cstdlib>
#include <cstring>

namespace singa {

/// `fallback` when `name` is unset or empty, else whether its value is anything but "0".
inline bool EnvFlag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::strcmp(v, "0") != 0;
}

}  // namespace singa
