"""PKB package modules of this plugin (`vm.Install('<module name>')`).

PKB imports these as `perfkitbenchmarker.linux_packages.<module>` (see
`mongobench_pkb`); never import them under any other name.
"""
