#include "runtime/shared_library.h"

#include <dlfcn.h>

namespace ember {

std::unique_ptr<SharedLibrary> SharedLibrary::open(const std::string& path, std::string* error) {
  // dlopen() searches the library path for a name without a slash; a kernel library is
  // always meant to be the file named, so make the name a path.
  std::string name = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (error) {
      const char* message = ::dlerror();  // per-thread in glibc, so this is our failure
      *error = message ? message : "dlopen failed for " + path;
    }
    return nullptr;
  }
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(handle, path));
}

SharedLibrary::~SharedLibrary() { ::dlclose(handle_); }

void* SharedLibrary::symbol(const char* name) const { return ::dlsym(handle_, name); }

}  // namespace ember
