"""Qualification: the admission ledger, the route x family catalog and matrix, AI Hub jobs, verify targets."""
