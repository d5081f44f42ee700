"""Units of size. Binary units for memory and documents; MB (decimal) where seed 002 counts
dataset sizes (1 MB = 1,000 records of 1 KB)."""

KiB = 1024
MiB = 1024 * 1024
GiB = 1024**3
MB = 1_000_000
