"""ember's front end: a Dynamo graph to an imported ATen graph.

Tracing (aten_trace: ember's own, for inference graphs; AOTAutograd for the rest, with
decompositions' table), the rewrites before it (attention), ember's CSE of a joint graph
(cse), the graph's place in the user's code (graph_source), and the import into the C++
IR's text (fx_import: ImportedGraph, which the runtime and the caches read).
"""
