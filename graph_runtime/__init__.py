"""The graph runtime both apps share: the registry of graphs, the checkpointer, and running a graph."""
