"""What a run measures besides its own operations: the OS sampler, server statistics, the bottleneck judgement and the rates past runs recorded."""
