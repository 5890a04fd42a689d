"""The model suite (issues 23 and 24): 45 models with random weights, and the runner that
measures eager, TorchInductor and ember on them side by side. See docs/benchmarks.md."""
