import sys, torch, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import cases, ember
ember.config.fallback_on_error = False
name, dt = sys.argv[1], sys.argv[2]
idx = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else None
op = cases.find_op(name)
ss = cases.samples(op, dt)
for i, s in enumerate(ss):
    if idx is not None and i not in idx: continue
    print(i, "input", s.input.shape if hasattr(s.input,'shape') else s.input, s.input.stride() if hasattr(s.input,'stride') else '', s.args, s.kwargs, flush=True)
    r = cases.run_case(op, dt, s)
    print("  ->", r["class"], r["reason"][:500], [o for o in r["ops"] if o[1] != "kernel"][:4], flush=True)
