"""Putting MongoDB somewhere: mongod install and configuration, host settings, replica sets and sharding, and Atlas."""
