"""The seed 002 dataset-size sweep: plan, samples and the one loop for PKB and the CLI."""
