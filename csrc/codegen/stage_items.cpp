#include "codegen/stage_items.h"

namespace ember {

bool print_stage_items(CEmitter& em, const StageItems& items) {
  const Program& p = items.p;
  bool stored = false;
  for (size_t i = 0; i < items.stage.items.size(); ++i) {
    const KernelItem& item = items.stage.items[i];
    if (items.skip && items.skip(item)) continue;
    const ComputedBuffer& c = p.computed[item.computed];
    const DType t = p.buffers[c.buffer].dtype;
    const bool in_memory = items.in_memory[c.buffer];
    std::string v = em.emit(item.value);
    if (item.is_scan) {
      // The running value after this step is the element: stored, and a local here.
      const std::string& acc = items.accs[i].acc;
      em.line(scan_step_text(c.reduce_op, items.accs[i], v));
      std::string step = em.fresh("scan");
      std::string conv = acc;
      if (t == DType::F16) conv = "ember_round_h(" + conv + ")";
      if (t == DType::BF16) conv = "ember_round_bf(" + conv + ")";
      em.line("const " + CEmitter::c_type(t) + " " + step + " = " + conv + ";");
      if (in_memory) em.line(CEmitter::store_text(em.buffer_name(c.buffer), em.emit(item.store_index), t, step));
      stored |= in_memory;
      em.bind_local(c.buffer, step, em.depth());
      continue;
    }
    if (item.scatter_add) {  // into f32 (verify_program); the CUDA prelude's atomic add
      em.line("ember_scatter_add(&" + em.buffer_name(c.buffer) + "[" + em.emit(item.store_index) + "], " + v + ");");
      stored = true;
      continue;
    }
    if (c.is_reduction) {
      accumulate(em, c, items.accs[i], v, c.is_arg_reduction() ? items.arg_index() : "");
      continue;
    }
    if (in_memory)
      em.line(items.store_prefix + CEmitter::store_text(em.buffer_name(c.buffer), em.emit(item.store_index), t, v));
    stored |= in_memory;
    em.bind_local(c.buffer, v, em.depth());
  }
  return stored;
}

}  // namespace ember
