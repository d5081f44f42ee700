"""mongod install/config/start/stop/host-settings commands, per OS and version.

The expected strings are the manual's (read 2026-11):
- Ubuntu: https://www.mongodb.com/docs/manual/tutorial/install-mongodb-on-ubuntu/
  echo "deb [ arch=amd64,arm64 signed-by=/usr/share/keyrings/mongodb-server-8.0.gpg ]
  https://repo.mongodb.org/apt/ubuntu noble/mongodb-org/8.0 multiverse"
- Debian: https://www.mongodb.com/docs/manual/tutorial/install-mongodb-on-debian/
  "deb [ signed-by=/usr/share/keyrings/mongodb-server-8.0.gpg ]
  http://repo.mongodb.org/apt/debian bookworm/mongodb-org/8.0 main" (we use https)
- RHEL: https://www.mongodb.com/docs/manual/tutorial/install-mongodb-on-red-hat/
  baseurl=https://repo.mongodb.org/yum/redhat/9/mongodb-org/8.0/x86_64/,
  gpgkey=https://pgp.mongodb.com/server-8.0.asc
- Platform matrix: https://www.mongodb.com/docs/manual/administration/production-notes/
- Removed options: .../reference/configuration-file-settings-command-line-options-mapping/
- THP by version: https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/
"""

import io
import os
import resource
import socket
import subprocess
import tarfile
import time

import pytest
import yaml

from mongobench.deploy import hostsettings, install, mongod
from mongobench.measure import serverstats
from mongobench.remote import probes, processes

PLATFORMS = [
    ("ubuntu", "22.04", "x86_64", "jammy"),
    ("ubuntu", "22.04", "aarch64", "jammy"),
    ("ubuntu", "24.04", "x86_64", "noble"),
    ("ubuntu", "24.04", "arm64", "noble"),
    ("debian", "12", "amd64", "bookworm"),
    ("rhel", "9", "x86_64", None),
    ("rocky", "9.4", "aarch64", None),
]


def bash_syntax_ok(cmd):
    return subprocess.run(["bash", "-n", "-c", cmd], capture_output=True).returncode == 0


@pytest.mark.parametrize("family,release,arch,codename", PLATFORMS)
def test_repo_commands_follow_the_documented_layout(family, release, arch, codename):
    cmds = install.repo_setup_commands(family, release, arch, "8.0")
    joined = "\n".join(cmds)
    assert all(bash_syntax_ok(c) for c in cmds)
    if family == "ubuntu":
        assert (
            "deb [ arch=amd64,arm64 signed-by=/usr/share/keyrings/mongodb-server-8.0.gpg ]"
            f" https://repo.mongodb.org/apt/ubuntu {codename}/mongodb-org/8.0 multiverse"
        ) in joined
    elif family == "debian":
        assert (
            "deb [ signed-by=/usr/share/keyrings/mongodb-server-8.0.gpg ]"
            " https://repo.mongodb.org/apt/debian bookworm/mongodb-org/8.0 main"
        ) in joined
    if family in ("ubuntu", "debian"):
        assert (
            "curl -fsSL https://www.mongodb.org/static/pgp/server-8.0.asc"
            " | sudo gpg --batch --yes -o /usr/share/keyrings/mongodb-server-8.0.gpg --dearmor"
        ) in cmds
        assert "sudo tee /etc/apt/sources.list.d/mongodb-org-8.0.list" in joined
        assert "apt-key" not in joined  # deprecated; the keyring is referenced by signed-by
        # packages and lists go through PKB's package mechanism (it retries): no apt-get here
        assert "apt-get" not in joined
        assert install.repo_prerequisites(install.platform(family, release, arch)) == [
            "gnupg",
            "curl",
            "ca-certificates",
        ]
    else:
        arch_dir = "x86_64" if arch == "x86_64" else "aarch64"
        (cmd,) = cmds
        repo = cmd.split("'")[1]
        assert repo.splitlines() == [
            "[mongodb-org-8.0]",
            "name=MongoDB Repository",
            f"baseurl=https://repo.mongodb.org/yum/redhat/9/mongodb-org/8.0/{arch_dir}/",
            "gpgcheck=1",
            "enabled=1",
            "gpgkey=https://pgp.mongodb.com/server-8.0.asc",
        ]
        assert cmd.endswith("| sudo tee /etc/yum.repos.d/mongodb-org-8.0.repo >/dev/null")


@pytest.mark.parametrize(
    "family,release,arch,version,repo_line",
    [
        # defect 5: MongoDB ships packages for these; they were refused
        ("ubuntu", "20.04", "arm64", "8.0", "apt/ubuntu focal/mongodb-org/8.0 multiverse"),
        ("debian", "11", "x86_64", "7.0", "apt/debian bullseye/mongodb-org/7.0 main"),
        ("amzn", "2023", "aarch64", "8.0", "yum/amazon/2023/mongodb-org/8.0/aarch64/"),
        ("rhel", "8", "x86_64", "6.0", "yum/redhat/8/mongodb-org/6.0/x86_64/"),
    ],
)
def test_platforms_mongodb_publishes_packages_for_are_installed(
    family, release, arch, version, repo_line
):
    cmds = install.repo_setup_commands(family, release, arch, version)
    assert any(f"https://repo.mongodb.org/{repo_line}" in c for c in cmds), cmds
    assert all(bash_syntax_ok(c) for c in cmds)


def test_repo_series_follows_the_version_and_sudo_is_optional():
    cmds = install.repo_setup_commands("ubuntu", "22.04", "x86_64", "7.0.14", sudo=False)
    assert any("jammy/mongodb-org/7.0 multiverse" in c for c in cmds)
    assert any("server-7.0.asc" in c for c in cmds)
    assert not any("sudo" in c for c in cmds)


@pytest.mark.parametrize(
    "family,release,arch,version,why",
    [
        ("debian", "12", "arm64", "8.0", "x86_64 only"),  # no Debian arm64 packages
        ("ubuntu", "24.04", "x86_64", "7.0", "no Community packages for ubuntu 24.04"),
        ("ubuntu", "24.04", "arm64", "6.0", "available: 8.0"),
        ("debian", "12", "x86_64", "6.0", "available: 7.0, 8.0"),
        ("debian", "12", "x86_64", "7.0.2", "from MongoDB 7.0.3"),
        ("rhel", "9", "aarch64", "6.0.6", "from MongoDB 6.0.7"),
        ("ubuntu", "22.04", "x86_64", "5.0", "available"),
        ("ubuntu", "22.04", "x86_64", "8.2", "available"),
        ("ubuntu", "18.04", "x86_64", "6.0", "supported are"),
        ("debian", "13", "x86_64", "8.0", "supported are"),
        ("amzn", "2", "x86_64", "6.0", "supported are"),
        ("amzn", "2023", "x86_64", "6.0", "available: 7.0, 8.0"),
        ("debian", "11", "arm64", "7.0", "x86_64 only"),
        ("opensuse", "15", "x86_64", "8.0", "family"),
        ("ubuntu", "22.04", "ppc64le", "8.0", "architecture"),
    ],
)
def test_unpublished_combinations_are_refused_clearly(family, release, arch, version, why):
    with pytest.raises(install.UnsupportedPlatform, match=why):
        install.repo_setup_commands(family, release, arch, version)


def test_install_pins_full_versions_per_package_manager():
    apt = install.server_packages("ubuntu", "24.04", "x86_64", "8.0.4")
    assert apt == ["mongodb-org-server=8.0.4", "mongodb-org-mongos=8.0.4"]
    dnf = install.server_packages("rhel", "9", "x86_64", "7.0.12", with_shell=True)
    assert dnf == ["mongodb-org-server-7.0.12", "mongodb-org-mongos-7.0.12", "mongodb-mongosh"]
    series_only = install.server_packages("debian", "12", "x86_64", "8.0", with_mongos=False)
    assert series_only == ["mongodb-org-server"]
    # the packaged service would occupy 27017: ours are started by background_command
    after = install.after_install_commands()
    assert "systemctl disable --now mongod" in after[0]
    assert all(bash_syntax_ok(c) for c in after)


@pytest.mark.parametrize(
    "version,family,release,arch,name",
    [
        ("7.0.12", "ubuntu", "22.04", "x86_64", "mongodb-linux-x86_64-ubuntu2204-7.0.12.tgz"),
        ("8.0.4", "ubuntu", "22.04", "arm64", "mongodb-linux-aarch64-ubuntu2204-8.0.4.tgz"),
        ("8.0.4", "ubuntu", "24.04", "aarch64", "mongodb-linux-aarch64-ubuntu2404-8.0.4.tgz"),
        ("8.0.4", "debian", "12", "x86_64", "mongodb-linux-x86_64-debian12-8.0.4.tgz"),
        ("7.0.12", "rhel", "9", "x86_64", "mongodb-linux-x86_64-rhel90-7.0.12.tgz"),
        ("8.0.4", "rocky", "9", "x86_64", "mongodb-linux-x86_64-rhel93-8.0.4.tgz"),
        ("8.0.12", "almalinux", "9.5", "aarch64", "mongodb-linux-aarch64-rhel93-8.0.12.tgz"),
    ],
)
def test_tarball_urls(version, family, release, arch, name):
    assert (
        install.tarball_url(version, family, release, arch)
        == f"https://fastdl.mongodb.org/linux/{name}"
    )


def test_tarball_needs_full_version_and_a_published_platform():
    with pytest.raises(ValueError, match="full version"):
        install.tarball_url("8.0", "ubuntu", "22.04", "x86_64")
    with pytest.raises(install.UnsupportedPlatform):
        install.tarball_url("8.0.4", "debian", "12", "arm64")


def _fake_mongodb_tree(tmp_path, version="8.0.4"):
    """A tarball shaped like MongoDB's (top dir + bin/mongod) whose mongod prints a version
    and, when started with --config, waits for SIGTERM like the real server."""
    script = (
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then echo "db version v{version}"; exit 0; fi\n'
        "trap 'exit 0' TERM\n"
        "while :; do sleep 0.1; done\n"
    )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = script.encode()
        info = tarfile.TarInfo(f"mongodb-linux-x86_64-ubuntu2204-{version}/bin/mongod")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "mongodb.tgz"
    path.write_bytes(buf.getvalue())
    return path


def test_tarball_install_unpacks_and_reports_the_version(tmp_path):
    src = _fake_mongodb_tree(tmp_path)
    dest = tmp_path / "opt mongo"  # a space, to prove the quoting
    out = ""
    for cmd in install.tarball_install_commands(f"file://{src}", str(dest)):
        res = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
        out = res.stdout
    assert install.version_from_output(out) == "8.0.4"
    assert (dest / "bin" / "mongod").exists() and not (dest / "mongodb.tgz").exists()
    check = subprocess.run(
        install.bin_dir_check_command(str(dest / "bin") + "/"),
        shell=True,
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0 and "v8.0.4" in check.stdout
    missing = subprocess.run(install.bin_dir_check_command(str(tmp_path / "none")), shell=True)
    assert missing.returncode != 0


def test_version_parsing():
    assert install.parse_version("8.0") == (8, 0)
    assert install.parse_version("v7.0.12-rc1") == (7, 0, 12)
    assert install.series("8.0.4") == "8.0"
    with pytest.raises(ValueError):
        install.parse_version("latest")
    with pytest.raises(ValueError):
        install.version_from_output("mongos version v8.0.4")


def test_platform_detection_from_os_release():
    ubuntu = 'NAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nID_LIKE=debian\n'
    assert install.platform_from_os_release(ubuntu, "aarch64") == install.Platform(
        "ubuntu", "24.04", "aarch64"
    )
    rocky = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'
    plat = install.platform_from_os_release(rocky, "x86_64")
    assert plat == install.Platform("rhel", "9", "x86_64") and plat.package_manager == "yum"
    debian = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n'
    assert install.platform_from_os_release(debian, "x86_64").package_manager == "apt"
    with pytest.raises(install.UnsupportedPlatform):
        install.platform_from_os_release('ID=pop\nVERSION_ID="22.04"\n', "x86_64")


def opts(cache_gb, bind_ip, replset=None, role="mongod", extra=None):
    return mongod.InstanceOptions(
        cache_gb=cache_gb, bind_ip=bind_ip, replset=replset, role=role, extra=extra
    )


@pytest.mark.parametrize("version", ["6.0", "7.0", "7.0.12", "8.0", "8.0.4"])
def test_mongod_config_is_valid_for_the_version(version):
    cfg = mongod.mongod_config(
        2,
        27019,
        "/data/db2",
        "/data/log/m2.log",
        mongod.InstanceOptions(cache_gb=1.5, bind_ip="127.0.0.1,10.0.0.5"),
        version=version,
    )
    text = mongod.render_config(cfg, instance=2)
    assert text.startswith("# mongobench instance 2\n")
    doc = yaml.safe_load(text)
    assert doc == {
        "storage": {"dbPath": "/data/db2", "wiredTiger": {"engineConfig": {"cacheSizeGB": 1.5}}},
        "systemLog": {"destination": "file", "path": "/data/log/m2.log", "logAppend": True},
        "net": {"port": 27019, "bindIp": "127.0.0.1,10.0.0.5"},
    }
    # journaling cannot be configured since 6.1, and we track PIDs instead of forking
    assert "journal" not in text and "fork" not in text and "processManagement" not in doc


def test_replica_set_and_sharding_roles():
    shard = mongod.mongod_config(
        0, 27018, "/d", "/l", opts(2, "0.0.0.0", "shard0", "shardsvr"), version="8.0"
    )
    assert shard["replication"] == {"replSetName": "shard0"}
    assert shard["sharding"] == {"clusterRole": "shardsvr"}
    cfgsvr = mongod.mongod_config(
        0, 27019, "/d", "/l", opts(0.25, "0.0.0.0", "cfg", "configsvr"), version="7.0"
    )
    assert cfgsvr["sharding"] == {"clusterRole": "configsvr"}
    with pytest.raises(ValueError, match="replica sets"):
        mongod.mongod_config(
            0, 27018, "/d", "/l", opts(1, "0.0.0.0", None, "shardsvr"), version="8.0"
        )
    with pytest.raises(ValueError, match="configsvr or shardsvr"):
        mongod.mongod_config(
            0, 27018, "/d", "/l", opts(1, "0.0.0.0", "rs", "arbiter"), version="8.0"
        )
    with pytest.raises(ValueError, match="0.25"):
        mongod.mongod_config(3, 27018, "/d", "/l", opts(0.1, "0.0.0.0"), version="8.0")


def test_removed_options_are_refused_per_version():
    journal = {"storage": {"journal": {"enabled": True}}}
    # accepted by 6.0, removed in 6.1
    cfg = mongod.mongod_config(0, 1, "/d", "/l", opts(1, "h", extra=journal), version="6.0")
    assert cfg["storage"]["journal"] == {"enabled": True}
    assert cfg["storage"]["dbPath"] == "/d"  # extra merges, it does not replace the section
    for version in ("7.0", "8.0.4"):
        with pytest.raises(ValueError, match="removed in MongoDB 6.1"):
            mongod.mongod_config(0, 1, "/d", "/l", opts(1, "h", extra=journal), version=version)
    with pytest.raises(ValueError, match="fork"):
        mongod.mongod_config(
            0,
            1,
            "/d",
            "/l",
            opts(1, "h", extra={"processManagement": {"fork": True}}),
            version="8.0",
        )
    with pytest.raises(ValueError, match="serviceExecutor"):
        mongod.validate_config({"net": {"serviceExecutor": "adaptive"}}, "7.0")
    ok = mongod.mongod_config(
        0,
        1,
        "/d",
        "/l",
        opts(1, "h", extra={"storage": {"journal": {"commitIntervalMs": 50}}}),
        version="8.0",
    )
    assert ok["storage"]["journal"] == {"commitIntervalMs": 50}  # still a valid option


@pytest.mark.parametrize("version", ["6.0", "7.0.12", "8.0.4"])
def test_tls_config_uses_the_net_tls_names(version):
    tls = mongod.tls_settings("/w/tls/server.pem")
    cfg = mongod.mongod_config(0, 27017, "/d", "/l", opts(1, "10.0.0.5"), version=version, tls=tls)
    doc = yaml.safe_load(mongod.render_config(cfg))
    # requireTLS: plain connections are refused; no CAFile: no client certificates asked for
    assert doc["net"] == {
        "port": 27017,
        "bindIp": "10.0.0.5",
        "tls": {"mode": "requireTLS", "certificateKeyFile": "/w/tls/server.pem"},
    }
    with_ca = mongod.tls_settings("/w/s.pem", ca_file="/w/ca.pem")["tls"]
    # a CAFile alone would make mongod refuse every client without a certificate
    assert with_ca == {
        "mode": "requireTLS",
        "certificateKeyFile": "/w/s.pem",
        "CAFile": "/w/ca.pem",
        "allowConnectionsWithoutCertificates": True,
    }
    strict = mongod.tls_settings(
        "/w/s.pem", ca_file="/w/ca.pem", allow_connections_without_certificates=False
    )
    assert strict["tls"]["allowConnectionsWithoutCertificates"] is False
    # extra still merges into net without dropping tls
    cfg = mongod.mongod_config(
        0,
        1,
        "/d",
        "/l",
        opts(1, "h", extra={"net": {"maxIncomingConnections": 9}}),
        version=version,
        tls=tls,
    )
    assert cfg["net"]["tls"]["mode"] == "requireTLS" and cfg["net"]["maxIncomingConnections"] == 9


def test_tls_config_is_refused_where_mongod_would_refuse_it():
    with pytest.raises(ValueError, match="new in MongoDB 4.2"):
        mongod.validate_config(
            {"net": {"tls": {"mode": "requireTLS", "certificateKeyFile": "/p"}}}, "4.0"
        )
    mongod.validate_config(
        {"net": {"tls": {"mode": "requireTLS", "certificateKeyFile": "/p"}}}, "4.2"
    )
    with pytest.raises(ValueError, match="must be one of"):
        mongod.tls_settings("/p", mode="requireSSL")  # the net.ssl spelling
    with pytest.raises(ValueError, match="needs net.tls.certificateKeyFile"):
        mongod.tls_settings("")
    with pytest.raises(ValueError, match="must not be mixed"):
        mongod.mongod_config(
            0,
            1,
            "/d",
            "/l",
            opts(1, "h", extra={"net": {"ssl": {"mode": "requireSSL"}}}),
            version="8.0",
            tls=mongod.tls_settings("/p"),
        )
    assert mongod.tls_settings("/p", mode="disabled")["tls"]["mode"] == "disabled"


def test_mongos_config_has_no_storage():
    cfg = mongod.mongos_config(
        27017, "cfg/a:27019,b:27019,c:27019", "/l/mongos.log", "0.0.0.0", version="8.0"
    )
    assert cfg["sharding"] == {"configDB": "cfg/a:27019,b:27019,c:27019"}
    assert "storage" not in cfg and "replication" not in cfg


def _limits():
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    inf = resource.RLIM_INFINITY
    return (4096 if nofile == inf else nofile), (4096 if nproc == inf else nproc)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_start_and_stop_by_pid(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    src = _fake_mongodb_tree(tmp_path)
    subprocess.run(
        ["tar", "-xzf", str(src), "-C", str(tmp_path / "bin"), "--strip-components=2"], check=True
    )
    conf, pid_file, out = tmp_path / "c.yaml", tmp_path / "m.pid", tmp_path / "m.out"
    conf.write_text(
        mongod.render_config(mongod.mongod_config(0, 1, "/d", "/l", opts(1, "h"), version="8.0"))
    )
    nofile, nproc = _limits()
    cmd = processes.background_command(
        [f"{bin_dir}/mongod", "--config", str(conf)],
        processes.Launch(pid_file=str(pid_file), stdout=str(out), nofile=nofile, nproc=nproc),
    )
    assert bash_syntax_ok(cmd) and cmd.startswith("bash -c ")
    subprocess.run(cmd, shell=True, check=True, timeout=10)
    pid = int(pid_file.read_text())
    assert _alive(pid)
    # $! is the server itself: the same PID goes setsid -> nohup -> mongod by exec, no fork
    deadline = time.time() + 5
    while True:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        if argv[0] not in (b"setsid", b"nohup", b"") and any(
            a.endswith(b"bin/mongod") for a in argv
        ):
            break
        assert time.time() < deadline, f"PID {pid} never became the server: {argv}"
        time.sleep(0.02)
    limits = probes.parse_process_limits(open(f"/proc/{pid}/limits").read())
    assert limits["nofile"] == nofile and limits["nproc"] == nproc
    subprocess.run(
        processes.stop_processes_command([str(pid_file)], marker=str(tmp_path), timeout_s=5),
        shell=True,
        check=True,
        timeout=15,
    )
    deadline = time.time() + 5
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(pid) and not pid_file.exists()
    # idempotent: no PID file, nothing to do
    subprocess.run(
        processes.stop_processes_command([str(pid_file)], marker=str(tmp_path)),
        shell=True,
        check=True,
    )


def test_stop_never_kills_a_process_that_is_not_ours(tmp_path):
    other = subprocess.Popen(["sleep", "30"])
    try:
        pid_file = tmp_path / "stale.pid"
        pid_file.write_text(str(other.pid))  # a stale PID file now naming another program
        subprocess.run(
            processes.stop_processes_command([str(pid_file)], marker=str(tmp_path), timeout_s=1),
            shell=True,
            check=True,
        )
        assert other.poll() is None and not pid_file.exists()
    finally:
        other.kill()
        other.wait()


def test_wait_for_port(tmp_path):
    # a live process of ours stands for the server (without one the wait fails at once)
    marked = subprocess.Popen(["bash", "-c", "sleep 30; true", str(tmp_path)])
    pid_file = tmp_path / "s.pid"
    pid_file.write_text(str(marked.pid))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]
    try:
        try:
            assert (
                subprocess.run(
                    processes.wait_ready_command(
                        str(pid_file), "127.0.0.1", port, marker=str(tmp_path), timeout_s=5
                    ),
                    shell=True,
                ).returncode
                == 0
            )
        finally:
            srv.close()
        res = subprocess.run(
            processes.wait_ready_command(
                str(pid_file), "127.0.0.1", port, marker=str(tmp_path), timeout_s=1
            ),
            shell=True,
            capture_output=True,
            text=True,
        )
        assert res.returncode == 1 and "nothing listens" in res.stderr
    finally:
        marked.kill()
        marked.wait()


def test_process_limits_parser_on_real_proc_file():
    limits = probes.parse_process_limits(open("/proc/self/limits").read())
    assert limits["nofile"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_host_settings_follow_the_version():
    old = {s.name: s.value for s in hostsettings.host_settings("7.0")}
    assert old == {
        "thp_enabled": "never",
        "thp_defrag": "never",
        "swappiness": "1",
        "zone_reclaim_mode": "0",
    }
    new = {s.name: s.value for s in hostsettings.host_settings("8.0.4")}
    assert new == {
        "thp_enabled": "always",
        "thp_defrag": "defer+madvise",
        "thp_max_ptes_none": "0",
        "overcommit_memory": "1",
        "swappiness": "1",
        "zone_reclaim_mode": "0",
    }


def _fake_root(tmp_path):
    """A copy of the kernel knobs as files, as a host would show them before the run."""
    root = tmp_path / "root"
    files = {
        "sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
        "sys/kernel/mm/transparent_hugepage/defrag": "always defer defer+madvise [madvise] never\n",
        "sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none": "511\n",
        "proc/sys/vm/swappiness": "60\n",
        "proc/sys/vm/overcommit_memory": "0\n",
        # no zone_reclaim_mode: a kernel without NUMA lacks the knob
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("version", ["7.0", "8.0"])
def test_record_apply_restore_round_trip(tmp_path, version):
    root = _fake_root(tmp_path)
    state = tmp_path / "state" / "host-settings.prev"
    state.parent.mkdir()
    prefix = str(root)
    _sh(hostsettings.record_settings_command(str(state), root=prefix, sudo=False))
    recorded = hostsettings.parse_settings(state.read_text())
    assert recorded == {
        "thp_enabled": "madvise",
        "thp_defrag": "madvise",
        "thp_max_ptes_none": 511,
        "swappiness": 60,
        "overcommit_memory": 0,
    }
    for cmd in hostsettings.apply_settings_commands(version, root=prefix, sudo=False):
        _sh(cmd)
    after = hostsettings.parse_settings(
        _sh(hostsettings.read_settings_command(root=prefix, sudo=False))
    )
    want = {s.name: s.value for s in hostsettings.host_settings(version)}
    assert {k: str(v) for k, v in after.items() if k in want} == {
        k: v for k, v in want.items() if k != "zone_reclaim_mode"
    }
    meta = hostsettings.host_settings_metadata(after, version)
    assert meta["host_settings_as_recommended"] is True
    # a second record (re-run, or a run after a crash) must keep the original values
    _sh(hostsettings.record_settings_command(str(state), root=prefix, sudo=False))
    assert hostsettings.parse_settings(state.read_text()) == recorded
    for cmd in hostsettings.restore_settings_commands(recorded, root=prefix, sudo=False):
        _sh(cmd)
    restored = hostsettings.parse_settings(
        _sh(hostsettings.read_settings_command(root=prefix, sudo=False))
    )
    assert restored == recorded


def test_host_settings_commands_record_before_applying():
    cmds = hostsettings.host_settings_commands(
        "8.0", "/var/tmp/mb.prev", "/data", "/dev/nvme1n1", readahead_sectors=16
    )
    assert cmds[0].startswith("test -e /var/tmp/mb.prev || ")
    assert "findmnt -n -o SOURCE --target /data" in cmds[0]
    assert cmds[-1] == "sudo blockdev --setra 16 /dev/nvme1n1"
    assert "echo always | sudo tee /sys/kernel/mm/transparent_hugepage/enabled" in "\n".join(cmds)
    assert all(bash_syntax_ok(c) for c in cmds)
    restore = hostsettings.restore_settings_commands(
        {"readahead_device": "/dev/nvme1n1", "readahead_sectors": 256, "swappiness": 60}
    )
    assert restore == [
        "test ! -e /proc/sys/vm/swappiness || echo 60 | sudo tee /proc/sys/vm/swappiness >/dev/null",
        "sudo blockdev --setra 256 /dev/nvme1n1",
    ]


def test_host_settings_metadata_reports_deviations():
    readings = {
        "thp_enabled": "always",
        "thp_defrag": "madvise",
        "swappiness": 60,
        "readahead_sectors": 256,
    }
    meta = hostsettings.host_settings_metadata(readings, "7.0", limits={"nofile": 64000})
    assert meta["host_thp_enabled"] == "always" and meta["host_swappiness"] == 60
    assert meta["mongod_ulimit_nofile"] == 64000
    assert meta["host_settings_as_recommended"] is False
    dev = meta["host_settings_deviations"]
    assert "thp_enabled=always(want never)" in dev and "swappiness=60(want 1)" in dev
    assert "readahead_sectors=256(want 8..32)" in dev
    assert "zone_reclaim_mode" not in dev  # absent knob is not a deviation
    assert hostsettings.host_settings_metadata({"swappiness": 1}) == {"host_swappiness": 1}


def test_read_settings_runs_on_this_host():
    # read-only; proves the script is valid sh and the parser understands real sysfs
    out = hostsettings.parse_settings(_sh(hostsettings.read_settings_command("/", sudo=False)))
    if os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        assert out["thp_enabled"] in ("always", "madvise", "never")
    assert isinstance(out["swappiness"], int)


# ---- defect 4: MongoDB 8.0 needs GLIBC_TUNABLES=glibc.pthread.rseq=0 (per-CPU TCMalloc)


def _start_fake_mongod(tmp_path, version):
    """Starts a stand-in 'mongod' binary (a shell script that sleeps) with the project's start
    command for `version`; returns the PID file and the PID."""
    binary = tmp_path / "mongod"
    binary.write_text("#!/bin/sh\nexec sleep 60\n")
    binary.chmod(0o755)
    paths = mongod.instance_paths(0, str(tmp_path / f"v{version}"))
    os.makedirs(paths.root)
    out = subprocess.run(
        ["bash", "-c", mongod.start_command(str(binary), paths, version=version)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return paths.pid_file, int(out.split()[-1])


def _environ(pid):
    # just after the fork the environment is still the shell's, until the script's exec of
    # sleep. The program is sleep when argv[0] is: the forked shell's command line (the whole
    # start command) contains "sleep" too. 2.5 s were not always enough on a loaded host.
    deadline = time.monotonic() + 30
    while True:
        final = open(f"/proc/{pid}/cmdline").read().split("\0")[0] == "sleep"
        if final or time.monotonic() > deadline:
            environ = open(f"/proc/{pid}/environ").read()
            return dict(kv.split("=", 1) for kv in environ.split("\0") if "=" in kv)
        time.sleep(0.05)


@pytest.mark.parametrize("version,expected", [("8.0", "glibc.pthread.rseq=0"), ("7.0", None)])
def test_mongod_8_runs_with_rseq_off_and_it_is_verified(tmp_path, version, expected):
    pid_file, pid = _start_fake_mongod(tmp_path, version)
    try:
        assert _environ(pid).get("GLIBC_TUNABLES") == expected
        readings = hostsettings.parse_settings(
            subprocess.run(
                ["bash", "-c", hostsettings.tcmalloc_readings_command(pid_file, sudo=False)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        # the verification reads what the process really got, judged as an 8.0 server
        meta = hostsettings.merge_tcmalloc(
            {"host_settings_as_recommended": True},
            hostsettings.tcmalloc_metadata(readings, "8.0"),
        )
    finally:
        os.kill(pid, 15)
    assert meta["mongod_glibc_tunables"] == (expected or "")
    glibc = tuple(map(int, os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2]))
    assert glibc >= (2, 35)  # Debian 12: 2.36, where glibc registers rseq itself
    assert meta["tcmalloc_rseq_ok"] is (expected is not None)
    assert meta["host_settings_as_recommended"] is (expected is not None)
    if expected is None:
        assert "GLIBC_TUNABLES=(want glibc.pthread.rseq=0)" in meta["host_settings_deviations"]


def test_tcmalloc_metadata_by_glibc_and_version():
    rseq = {
        "glibc_version": "2.35",
        "mongod_glibc_tunables": "glibc.malloc.x=1:glibc.pthread.rseq=0",
    }
    assert hostsettings.tcmalloc_metadata(rseq, "8.0.4")["tcmalloc_rseq_ok"] is True
    # glibc before 2.35 does not register rseq: nothing to judge
    old = {"glibc_version": "2.31", "mongod_glibc_tunables": ""}
    assert "tcmalloc_rseq_ok" not in hostsettings.tcmalloc_metadata(old, "8.0")
    # an unreadable environment is unknown, not a deviation
    unknown = hostsettings.tcmalloc_metadata({"glibc_version": "2.39"}, "8.0")
    assert unknown["mongod_glibc_tunables"] == "unknown" and "tcmalloc_rseq_ok" not in unknown
    assert hostsettings.tcmalloc_metadata(rseq, "7.0") == {}  # legacy TCMalloc before 8.0
    assert hostsettings.mongod_environment("7.0.12") == {}


def test_server_info_records_per_cpu_caches():
    on = serverstats.server_info({"version": "8.0.4", "tcmalloc": {"usingPerCPUCaches": True}})
    assert on["tcmalloc_per_cpu_caches"] is True
    assert "tcmalloc_per_cpu_caches" not in serverstats.server_info({"version": "7.0.2"})


# ---- defect 6: data disks are XFS (PKB formats them), recorded and warned about


def _benchmark_configs():
    """(name, config) of every shipped config file and every benchmark's BENCHMARK_CONFIG
    (read from the module's source: importing it needs PKB; YAML aliases of PKB's default
    specs left out)."""
    import ast
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    out = []
    for path in sorted((root / "configs").glob("*.yaml")):
        for name, cfg in yaml.safe_load(path.read_text()).items():
            out.append((f"{path.name}:{name}", cfg))
    for path in sorted((root / "linux_benchmarks").glob("*_benchmark.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and node.targets[0].id == "BENCHMARK_CONFIG":
                text = re.sub(r"\*\w+", "{}", node.value.value)
                for name, cfg in yaml.safe_load(text).items():
                    out.append((f"{path.name}:{name}", cfg))
    return out


def test_configs_with_a_data_disk_format_it_as_xfs():
    checked = []
    for name, cfg in _benchmark_configs():
        groups = cfg.get("vm_groups") or {}
        formatted = any(
            g.get("disk_spec") is not None and "static_vms" not in g for g in groups.values()
        )
        if formatted:  # PKB makes the filesystem on a cloud data disk (FormatDisk)
            assert (cfg.get("flags") or {}).get("disk_fs_type") == "xfs", name
            checked.append(name)
    assert len(checked) >= 3, checked  # stress cloud config, stress and perftables defaults


def test_data_filesystem_is_recorded_and_a_non_xfs_one_warned_about(tmp_path):
    out = subprocess.run(
        ["bash", "-c", hostsettings.data_filesystem_command(str(tmp_path))],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    meta = hostsettings.data_filesystem_metadata(out)
    mounts = [line.split() for line in open("/proc/self/mounts")]
    best = max((m for m in mounts if str(tmp_path).startswith(m[1])), key=lambda m: len(m[1]))
    assert meta["data_fs_type"] == best[2]
    assert ("data_fs_warning" in meta) is (best[2] != "xfs")
    ext4 = hostsettings.data_filesystem_metadata("ext4 /dev/nvme1n1\n")
    assert ext4["data_fs_type"] == "ext4" and ext4["data_fs_device"] == "/dev/nvme1n1"
    assert "not xfs" in ext4["data_fs_warning"] and "--disk_fs_type=xfs" in ext4["data_fs_warning"]
    assert "data_fs_warning" not in hostsettings.data_filesystem_metadata("xfs /dev/sdb")
    assert hostsettings.data_filesystem_metadata("")["data_fs_type"] == "unknown"
