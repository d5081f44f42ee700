"""YCSB: property files and command lines, output parsing, and the merge of several processes' results."""
