"""The multiplexed driver: many one-in-flight clients per process, over pre-encoded requests."""
