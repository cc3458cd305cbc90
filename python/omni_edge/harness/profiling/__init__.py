"""The profiling protocol: what it measures per plan kind, its groups, reliability and sustained runs, the report."""
