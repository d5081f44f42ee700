"""Results to samples, the report and the comparison of runs."""
