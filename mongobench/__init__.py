"""PKB-free engine of the MongoDB benchmarks."""
