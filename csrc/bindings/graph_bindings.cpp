// Graph text utilities: round-trip a graph, ask which ops ember lowers.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "ir/graph.h"
#include "lower/lowering.h"

namespace nb = nanobind;

void define_graph(nb::module_& m) {
  m.def("normalize_graph", [](const std::string& text) { return ember::print_graph(ember::parse_graph(text)); },
        "Parse graph text and print it back in canonical form (raises ValueError on bad text).");
  m.def("has_lowering", &ember::has_lowering, "Whether ember compiles this ATen op itself.");
  m.def("lowered_ops", [] {
    nb::list out;
    for (const auto& [name, fn] : ember::lowering_table()) out.append(name);
    return out;
  });
}
