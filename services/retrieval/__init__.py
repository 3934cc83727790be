"""The retrieval service: composition (app), settings, the gRPC servicer, the catalog, grants
and permissions; search/ answers queries, indexing/ builds the index."""
