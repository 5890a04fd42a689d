#include "schedule/kernel.h"

namespace ember {

Dim Kernel::outer_numel() const { return product(outer); }

bool Kernel::scatter_adds() const {
  for (const auto& st : stages)
    for (const auto& item : st.items)
      if (item.scatter_add) return true;
  return false;
}

int64_t Kernel::work_per_row() const {
  int64_t w = 0;
  for (const auto& st : stages) {
    int64_t n = product(st.inner).hint();
    w += n * static_cast<int64_t>(st.items.size());
  }
  return w;
}

}  // namespace ember
