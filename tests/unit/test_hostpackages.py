"""A static Debian host's packages at teardown: purge what the run installed, nothing else
(mongobench.deploy.hostpackages). The apt outputs are real ones (Debian 12, apt 2.6)."""

from mongobench.deploy import hostpackages

SNAPSHOT = "adduser\t\t\t\t\t\tinstall\nlibc6:amd64\t\t\t\t\tinstall\nold-tool\t\t\t\tdeinstall\n"
NOW = (
    SNAPSHOT
    + "openjdk-17-jre-headless:amd64\t\t\tinstall\npython3-venv\t\t\t\t\tinstall\n"
    + "was-removed\t\t\t\tdeinstall\n"
)

# apt-get -s purge libjudydebian1: stress-ng, which the host had, depends on it
PURGE_A_DEPENDENCY = """Reading package lists...
Building dependency tree...
Reading state information...
The following packages will be REMOVED:
  libjudydebian1* stress-ng*
0 upgraded, 0 newly installed, 2 to remove and 130 not upgraded.
Purg stress-ng [0.15.06-2]
Purg libjudydebian1 [1.0.5-5+b2]
"""
PURGE_ALONE = """The following packages will be REMOVED:
  python3-venv* openjdk-17-jre-headless*
0 upgraded, 0 newly installed, 2 to remove and 130 not upgraded.
Purg python3-venv [3.11.2-1+b1]
Purg openjdk-17-jre-headless [17.0.21.1+2-1~deb12u1]
"""


def test_what_the_run_added_is_what_is_selected_for_install_now_and_not_before():
    assert hostpackages.installed(SNAPSHOT) == {"adduser", "libc6:amd64"}
    assert hostpackages.added(SNAPSHOT, NOW) == ["openjdk-17-jre-headless:amd64", "python3-venv"]
    assert hostpackages.added(NOW, NOW) == []


def test_a_purge_that_removes_nothing_else_is_allowed():
    # apt names the native architecture's packages without their ":amd64"
    added = hostpackages.added(SNAPSHOT, NOW)
    assert hostpackages.others_removed(added, PURGE_ALONE) == []


def test_a_purge_that_removes_a_package_the_host_had_is_not():
    assert hostpackages.others_removed(["libjudydebian1"], PURGE_A_DEPENDENCY) == ["stress-ng"]


def test_the_commands_quote_and_never_upgrade():
    assert hostpackages.simulate_command(["a", "b:amd64"]) == "sudo apt-get -s purge a b:amd64"
    [cmd] = hostpackages.undo_commands(SNAPSHOT, ["a", "x;rm"])
    assert cmd == "sudo DEBIAN_FRONTEND=noninteractive apt-get purge -y -q a 'x;rm'"


def test_a_package_the_host_had_removed_keeps_its_configuration_files():
    # old-tool was removed before the run, its configuration files kept ("deinstall"); the
    # run installed it again: it is removed first (a purge would delete the host's files),
    # then the new ones are purged
    assert hostpackages.undo_commands(SNAPSHOT, ["libnew", "old-tool"]) == [
        "sudo DEBIAN_FRONTEND=noninteractive apt-get remove -y -q old-tool",
        "sudo DEBIAN_FRONTEND=noninteractive apt-get purge -y -q libnew",
    ]
    assert hostpackages.undo_commands(SNAPSHOT, []) == []
