"""Shared building blocks with no domain: units, even splits, redaction, files, polling, sample dicts, key=value pairs, markdown, latency histograms, prices and the shard key document."""
