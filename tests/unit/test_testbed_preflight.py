"""The test bed's preflight: the commands its static VM and PKB's boot need on this host."""

import os
import stat

import pytest

from testbed import __main__ as testbed_cli
from testbed import bed as testbed


def _bin_dir(tmp_path, commands):
    d = tmp_path / "bin"
    d.mkdir()
    for name in commands:
        exe = d / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return d


@pytest.fixture
def no_fdisk(tmp_path, monkeypatch):
    """PATH with everything but fdisk, and no sbin fallback (this host may have /usr/sbin/fdisk)."""
    d = _bin_dir(tmp_path, ["sshd", "ssh-keygen", "sudo"])
    monkeypatch.setenv("PATH", str(d))
    monkeypatch.setattr(testbed, "_SBIN_DIRS", ())
    return d


def test_missing_commands_are_named_with_their_packages(tmp_path):
    d = _bin_dir(tmp_path, ["ssh-keygen"])
    assert testbed.missing_host_commands(str(d)) == ["sshd", "sudo", "fdisk"]
    with pytest.raises(testbed.PreflightError) as exc:
        testbed.preflight(str(d))
    msg = str(exc.value)
    assert "\n" not in msg
    assert "lacks sshd, sudo, fdisk" in msg
    assert msg.endswith("apt-get install openssh-server sudo fdisk")


def test_nothing_missing_passes(tmp_path):
    d = _bin_dir(tmp_path, list(testbed.HOST_COMMANDS))
    assert testbed.missing_host_commands(str(d)) == []
    testbed.preflight(str(d))


def test_non_executable_file_does_not_count(tmp_path):
    d = _bin_dir(tmp_path, list(testbed.HOST_COMMANDS))
    os.chmod(d / "fdisk", 0o644)
    assert testbed.missing_host_commands(str(d)) == ["fdisk"]


def test_sbin_dirs_are_searched_like_sudo_does(tmp_path, monkeypatch):
    sbin = _bin_dir(tmp_path, ["fdisk", "sshd"])
    user_bin = tmp_path / "user"
    user_bin.mkdir()
    monkeypatch.setenv("PATH", str(user_bin))
    monkeypatch.setattr(testbed, "_SBIN_DIRS", (str(sbin),))
    assert testbed.missing_host_commands() == ["ssh-keygen", "sudo"]


def test_up_fails_before_starting_anything(no_fdisk, tmp_path):
    d = tmp_path / "tb"
    with pytest.raises(testbed.PreflightError, match=r"lacks fdisk .*apt-get install fdisk$"):
        testbed.up(str(d))
    assert not d.exists()


def test_cli_prints_one_line(no_fdisk, tmp_path):
    with pytest.raises(SystemExit) as exc:
        testbed_cli.main(["up", "--dir", str(tmp_path / "tb")])
    assert str(exc.value).startswith("testbed: test bed host lacks fdisk")
    assert "\n" not in str(exc.value)
