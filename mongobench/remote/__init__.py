"""Shell command builders and parsers for a host: detached processes, host probes, shipping the engine, the Java build and TLS material."""
