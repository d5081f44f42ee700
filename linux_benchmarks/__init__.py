"""PKB benchmark modules of this plugin.

PKB imports these as `perfkitbenchmarker.linux_benchmarks.<module>` (see
`mongobench_pkb`); never import them under any other name, or absl flags get
defined twice.
"""
