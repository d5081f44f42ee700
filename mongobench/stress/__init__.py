"""mongodb_stress: sizing, placement, steps and the search for peak throughput."""
