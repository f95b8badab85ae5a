"""Django's PostgreSQL backend with a connection check that needs no round trip in the worker
(`base.DatabaseWrapper`; the check is the graph runtime's, graph_runtime/connections.py)."""
