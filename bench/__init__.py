"""assocdb benchmarks: each prints its figures next to a bare baseline from the same run."""
