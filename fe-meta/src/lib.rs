//! fe-meta: the replicated metadata service.
