// A loaded shared object (a compiled kernel library), unloaded when the object dies.
//
// RTLD_NOW: an unresolved symbol fails at open(), not at the first kernel call.
// RTLD_LOCAL: kernels' symbols never leak into, or get bound from, other libraries.
// Function pointers from symbol() are valid only while the SharedLibrary lives.
#pragma once

#include <memory>
#include <string>

namespace ember {

class SharedLibrary {
 public:
  // nullptr on failure, with dlerror()'s message in *error when error is not null.
  static std::unique_ptr<SharedLibrary> open(const std::string& path, std::string* error);

  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The symbol's address, or nullptr if the library does not define it.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  SharedLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
};

}  // namespace ember
