"""The Python driver of perftables: wire protocol, SCRAM, documents, workloads, multiplexed clients."""
