"""MongoDB's package repository on a static host: the files the run created are removed at
teardown, those the host had stay (mongobench.deploy.install)."""

import subprocess

import pytest

from mongobench.deploy import install


def test_the_repository_files_the_run_created_are_removed_and_the_hosts_stay(tmp_path):
    # MongoDB's apt list and keyring (or yum repo file): a host that had them keeps them
    had, new = tmp_path / "mongodb-org-8.0.list", tmp_path / "server-8.0.gpg"
    had.write_text("the host's own\n")
    record = tmp_path / "pkb" / "created files"
    record.parent.mkdir()

    def sh(cmd):
        subprocess.run(["sh", "-c", cmd], check=True)

    sh(install.record_new_files_command([str(had), str(new)], str(record)))
    new.write_text("written by the run\n")  # repo_setup_commands
    assert record.read_text() == f"{new}\n"
    sh(install.remove_recorded_files_command(str(record), sudo=False))
    assert had.exists() and not new.exists() and not record.exists()
    sh(install.remove_recorded_files_command(str(record), sudo=False))  # no record: nothing


@pytest.mark.parametrize(
    ("family", "release", "files"),
    [
        ("debian", "12", ["/usr/share/keyrings/mongodb-server-8.0.gpg",
                          "/etc/apt/sources.list.d/mongodb-org-8.0.list"]),
        ("rhel", "9", ["/etc/yum.repos.d/mongodb-org-8.0.repo"]),
    ],
)  # fmt: skip
def test_the_repository_files_are_those_the_setup_writes(family, release, files):
    assert install.repo_files(family, release, "x86_64", "8.0") == files
    setup = " ".join(install.repo_setup_commands(family, release, "x86_64", "8.0"))
    assert all(f in setup for f in files)
