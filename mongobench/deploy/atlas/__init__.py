"""An Atlas cluster as a target: the Admin API client, cluster bodies and the run's deployment."""
