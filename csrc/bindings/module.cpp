// The one Python extension module. Each area defines its bindings in its own file.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void define_graph(nb::module_& m);
void define_runtime(nb::module_& m);
void define_tools(nb::module_& m);
void define_cuda(nb::module_& m);
void define_cache(nb::module_& m);

NB_MODULE(_core, m) {
  m.doc() = "ember's C++ compiler core";
  // Compiled graphs live in module-level records until interpreter exit.
  nb::set_leak_warnings(false);
  define_graph(m);
  define_runtime(m);
  define_tools(m);
  define_cuda(m);
  define_cache(m);
}
