"""ember's runtime: what runs a compiled graph.

runner (GraphRunner: buffers, kernel groups, ATen calls), prepared (convolution weights
prepared once), cuda (the CUDA path: NVRTC, CudaGraphRunner), cudagraphs
(mode="reduce-overhead": CUDA graph recordings replayed).
"""
