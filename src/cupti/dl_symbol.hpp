// One symbol of a dlopen'ed library into a typed function pointer (CUPTI, the CUDA driver).
#pragma once

#include <dlfcn.h>

namespace gearshift::cupti {

// False (and `out` null) when `h` lacks `name`.
template <typename F>
bool resolve(void* h, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(h, name));
  return out != nullptr;
}

}  // namespace gearshift::cupti
