"""ember's caches and artifacts: what lets a later process skip tracing and compiling.

Storage: cache_dirs (which directories are safe), graph_format (ember's container and a
graph's state, no pickle), mega_cache (entries in torch's Mega-Cache). Warm starts, which
rebuild a runner through compiler.load_graph: graph_cache (inference graphs ember traced),
aot_cache (graphs in torch's AOTAutogradCache), precompile (torch's precompile API).
The kernel cache itself is C++ (csrc/runtime/disk_cache.h).
"""
