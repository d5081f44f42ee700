"""PKB package modules of this plugin (`vm.Install('<module name>')`): only what installs
software on a VM; the orchestration that installs nothing is in `mongobench_pkb`.

PKB imports these as `perfkitbenchmarker.linux_packages.<module>` (see
`mongobench_pkb`); never import them under any other name.
"""
