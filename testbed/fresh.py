"""Fresh machines for the test bed: one network namespace, Debian root and sshd per PKB VM.

`up_machines()` gives each named machine
  - its own network namespace, joined by a veth pair to a bridge the bed creates on the host,
    with a link-local address (169.254.N.x/24; the host side is 169.254.N.1). The namespaces
    have no default route: they reach each other and the host side of the link, nothing else;
  - its own Debian root, unpacked from a tarball made once by `mmdebstrap --variant=minbase`
    with what a fresh cloud image holds (ROOT_PACKAGES) and cached under `cache_dir`;
  - its own sshd (own host key, key-only root login, `UsePAM no`) on port 22 of its address,
    started as `ip netns exec NS unshare --mount --uts ... chroot ROOT /usr/sbin/sshd`: its
    /proc, /sys, /dev, /run mounts live in a private mount namespace and vanish with it;
  - package access through the bed's own apt-cacher-ng on the host side of the link: apt
    through it as an HTTP proxy, pip through it as a CONNECT proxy limited to PyPI.
`down_machines()` stops every process in the namespaces (found by namespace, `ip netns pids`),
deletes the namespaces and the bridge, stops the proxy and removes the roots.

Everything needs root (namespaces, chroot, mounts): `require_root()` says so in one line.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from mongobench.core.poll import PollTimeout, poll_until
from testbed.pids import stop_pid

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# What a Debian bookworm cloud image (genericcloud) holds beyond minbase and that a PKB run
# relies on being there: sshd and sudo (PKB logs in and runs everything with sudo), python3
# (cloud-init's), fdisk (PKB's static-VM boot runs `sudo fdisk -l`), procps, iproute2, curl
# and CA certificates. Not python3-venv, pip or a Java runtime: the plugin installs those.
ROOT_PACKAGES = (
    "openssh-server",
    "sudo",
    "python3",
    "fdisk",
    "procps",
    "iproute2",
    "ca-certificates",
    "curl",
    "netbase",
)
# Packages a fresh image lacks and the plugin must install (the fresh-bed tests check them).
NOT_IN_IMAGE = ("python3-venv", "openjdk-17-jre-headless")
HOST_COMMANDS = {
    "mmdebstrap": "mmdebstrap",
    "apt-cacher-ng": "apt-cacher-ng",
    "ip": "iproute2",
    "unshare": "util-linux",
    "ssh-keygen": "openssh-client",
    "zstd": "zstd",
}
# pip on the machines reaches PyPI through the proxy's CONNECT tunnel, nothing else.
PASS_THROUGH = r"^(pypi\.org|files\.pythonhosted\.org):443$"
SCRATCH = "/scratch"
LOCAL_CAS = "/usr/local/share/ca-certificates"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class FreshBedError(RuntimeError):
    """The host cannot run fresh machines (one line: what is missing and how to get it)."""


def _which(cmd: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), *_SBIN])
    return shutil.which(cmd, path=path)


def require_root() -> None:
    if os.geteuid() != 0:
        raise FreshBedError("--fresh needs root (network namespaces, chroot, mounts)")


def missing_host_commands() -> list[str]:
    return [c for c in HOST_COMMANDS if _which(c) is None]


def preflight() -> None:
    require_root()
    missing = missing_host_commands()
    if missing:
        packages = " ".join(dict.fromkeys(HOST_COMMANDS[c] for c in missing))
        raise FreshBedError(
            f"fresh test bed host lacks {', '.join(missing)}; install: apt-get install {packages}"
        )


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mongobench-testbed")


def host_mirror(sources: tuple[str, ...] = ("/etc/apt/sources.list",)) -> str:
    """The first plain-http Debian mirror in the host's apt sources (one-line or deb822
    format), else deb.debian.org: the proxy fetches from it, so it must be one the host
    reaches."""
    files = list(sources)
    d = "/etc/apt/sources.list.d"
    if os.path.isdir(d):
        files += sorted(os.path.join(d, f) for f in os.listdir(d))
    for path in files:
        try:
            text = open(path).read()
        except OSError:
            continue
        for uri in _debian_uris(text):
            return uri
    return DEFAULT_MIRROR


def _debian_uris(text: str):
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"deb\s+(?:\[[^]]*\]\s+)?(http://\S+)\s+(\S+)", line)
        if m and m.group(2) == SUITE:
            yield m.group(1).rstrip("/")
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.split()
        if SUITE in fields.get("suites", []) and "deb" in fields.get("types", []):
            for uri in fields.get("uris", []):
                if uri.startswith("http://") and uri.rstrip("/").endswith("/debian"):
                    yield uri.rstrip("/")


def root_tarball(cache_dir: str | None = None, mirror: str | None = None, log=None) -> str:
    """The cached Debian root tarball (made with mmdebstrap when missing); returns its path."""
    cache_dir = cache_dir or default_cache_dir()
    mirror = mirror or host_mirror()
    key = hashlib.sha256(f"{SUITE} {mirror} {' '.join(ROOT_PACKAGES)}".encode()).hexdigest()[:12]
    path = os.path.join(cache_dir, f"debian-{SUITE}-{key}.tar.zst")
    if os.path.exists(path):
        return path
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp.tar.zst"
    cmd = [
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(ROOT_PACKAGES)}",
        SUITE,
        tmp,
        mirror,
    ]
    try:
        subprocess.run(cmd, check=True, stdout=log, stderr=log or subprocess.PIPE)
    except subprocess.CalledProcessError as e:
        err = (e.stderr or b"").decode(errors="replace")[-500:] if e.stderr else "see the log"
        raise FreshBedError(f"mmdebstrap failed ({e.returncode}): {err.strip()}") from None
    finally:
        if not os.path.exists(path) and os.path.exists(tmp) and not _complete(tmp):
            os.unlink(tmp)
    os.replace(tmp, path)
    return path


def _complete(tmp: str) -> bool:
    return subprocess.run(["zstd", "-tq", tmp], capture_output=True).returncode == 0


# ----------------------------------------------------------------------------- network


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if check and p.returncode:
        raise FreshBedError(f"{' '.join(cmd)}: {p.stderr.strip() or p.returncode}")
    return p


def _used_link_local_nets() -> set[int]:
    out = _run("ip", "-4", "-o", "addr", "show").stdout
    return {int(m) for m in re.findall(r"inet 169\.254\.(\d+)\.", out)}


def _taken(n: int, links: str, netns: str) -> bool:
    # a bridge, a host-side veth or a namespace of bed n, even one left by a crashed bed
    return f"mbb{n}:" in links or f"mbv{n}-" in links or f"mb{n}-" in netns


def claim_net() -> int:
    """A 169.254.N.0/24 no interface of this host uses (N in 100..199, never 169), claimed by
    creating its bridge: `ip link add` is atomic, so two beds started at the same moment
    cannot both take N (the loser's add fails with "File exists" and it tries the next)."""
    used = _used_link_local_nets()
    links = _run("ip", "-o", "link", "show").stdout
    netns = _run("ip", "netns", "list").stdout
    for n in range(100, 200):
        if n in used or n == 169 or _taken(n, links, netns):
            continue
        p = _run("ip", "link", "add", bridge_name(n), "type", "bridge", check=False)
        if p.returncode:
            if "File exists" in p.stderr:
                continue
            raise FreshBedError(f"ip link add {bridge_name(n)} type bridge: {p.stderr.strip()}")
        _run("ip", "addr", "add", f"{host_address(n)}/24", "dev", bridge_name(n))
        _run("ip", "link", "set", bridge_name(n), "up")
        return n
    raise FreshBedError("no free 169.254.N.0/24 for the fresh test bed (N in 100..199)")


def bridge_name(net: int) -> str:
    return f"mbb{net}"


def ns_name(net: int, index: int) -> str:
    return f"mb{net}-{index}"


def address(net: int, index: int) -> str:
    """Machine `index` (0-based) is 169.254.N.(10+index); the host side is 169.254.N.1."""
    return f"169.254.{net}.{10 + index}"


def host_address(net: int) -> str:
    return f"169.254.{net}.1"


def make_namespace(net: int, index: int) -> None:
    ns, host_end, peer = ns_name(net, index), f"mbv{net}-{index}", f"mbp{net}-{index}"
    _run("ip", "netns", "add", ns)
    _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", peer)
    _run("ip", "link", "set", host_end, "master", bridge_name(net), "up")
    _run("ip", "link", "set", peer, "netns", ns)
    _run("ip", "-n", ns, "link", "set", peer, "name", "eth0")
    _run("ip", "-n", ns, "addr", "add", f"{address(net, index)}/24", "dev", "eth0")
    _run("ip", "-n", ns, "link", "set", "eth0", "up")
    _run("ip", "-n", ns, "link", "set", "lo", "up")


# ----------------------------------------------------------------------------- roots

SSHD_CONF = """\
# the fresh test bed: key-only root login, no PAM (no login session services in a chroot)
ListenAddress {address}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
HostKey /etc/ssh/ssh_host_ed25519_key
"""


def prepare_root(root: str, tarball: str, name: str, addr: str, hosts: str, proxy: str, pub: str):
    """Unpacks the image into `root` and gives it what a cloud VM's first boot gives it: host
    name, its own host key, the login key, the network's package proxy."""
    os.makedirs(root)
    _run("tar", "--zstd", "-xpf", tarball, "-C", root)
    _write(root, "etc/hostname", name + "\n")
    _write(root, "etc/hosts", f"127.0.0.1 localhost\n{hosts}")
    _write(root, "etc/resolv.conf", "")  # no DNS: nothing beyond the bed resolves
    for f in os.listdir(os.path.join(root, "etc/ssh")):
        if f.startswith("ssh_host_"):
            os.unlink(os.path.join(root, "etc/ssh", f))
    key = os.path.join(root, "etc/ssh/ssh_host_ed25519_key")
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key)
    _write(root, "etc/ssh/sshd_config.d/testbed.conf", SSHD_CONF.format(address=addr))
    os.makedirs(os.path.join(root, "root/.ssh"), mode=0o700, exist_ok=True)
    _write(root, "root/.ssh/authorized_keys", pub, mode=0o600)
    _write(root, "etc/apt/apt.conf.d/01testbed-proxy", f'Acquire::http::Proxy "{proxy}";\n')
    _write(root, "etc/pip.conf", f"[global]\nproxy = {proxy}\ncert = {CA_BUNDLE}\n")
    _trust_host_cas(root)
    os.makedirs(os.path.join(root, SCRATCH.lstrip("/")), exist_ok=True)


def _trust_host_cas(root: str) -> None:
    """The host's own CA certificates (/usr/local/share/ca-certificates), trusted on the
    machine too: where the host's network inspects TLS, pip's tunnel to PyPI shows that CA."""
    extra = (
        [f for f in sorted(os.listdir(LOCAL_CAS)) if f.endswith(".crt")]
        if os.path.isdir(LOCAL_CAS)
        else []
    )
    if not extra:
        return
    dest = os.path.join(root, LOCAL_CAS.lstrip("/"))
    os.makedirs(dest, exist_ok=True)
    for f in extra:
        shutil.copy(os.path.join(LOCAL_CAS, f), dest)
    _run("chroot", root, "update-ca-certificates", "--fresh")


def _write(root: str, rel: str, text: str, mode: int = 0o644) -> None:
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


# Run inside the machine's namespaces, before sshd: the mounts a booted system has, in a
# mount namespace of its own (private: nothing propagates to the host).
_BOOT = """\
set -e
R="$1"; hostname "$2"
mount -t proc proc "$R/proc"
mount --rbind /sys "$R/sys"
mount -t tmpfs -o mode=755,size=16m tmpfs "$R/dev"
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read n a b <<EOF
$d
EOF
  mknod -m 666 "$R/dev/$n" c "$a" "$b"
done
mkdir "$R/dev/pts" "$R/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$R/dev/pts"
ln -s pts/ptmx "$R/dev/ptmx"
ln -s /proc/self/fd "$R/dev/fd"
mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "$R/run"
mkdir -p "$R/run/sshd" "$R/run/lock"
exec chroot "$R" /usr/sbin/sshd -D -e
"""


def start_sshd(ns: str, root: str, name: str, log_path: str) -> subprocess.Popen:
    log = open(log_path, "ab")
    cmd = ["ip", "netns", "exec", ns, "unshare", "--mount", "--uts", "--propagation", "private"]
    cmd += ["sh", "-c", _BOOT, "boot", root, name]
    return subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)


def wait_ssh(addr: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    def check():
        if proc.poll() is not None:
            raise FreshBedError(f"sshd of {addr} exited with {proc.returncode} (see its log)")
        try:
            with socket.create_connection((addr, 22), timeout=0.5) as s:
                return s.recv(4).startswith(b"SSH-"), None
        except OSError:
            return False, None

    try:
        poll_until(check, timeout=timeout, interval=0.2)
    except PollTimeout:
        raise FreshBedError(f"no sshd answers on {addr}:22 after {timeout}s") from None


# ----------------------------------------------------------------------------- proxy


def start_proxy(net: int, workdir: str, cache_dir: str) -> tuple[subprocess.Popen, int]:
    """The bed's apt-cacher-ng on the host side of the link (its cache kept in `cache_dir`),
    on a free port of that address (a system apt-cacher-ng may hold 3142 on every address);
    returns (process, port)."""
    port = _free_port(host_address(net))
    cache = os.path.join(cache_dir, "apt-cacher-ng")
    logs = os.path.join(workdir, "apt-cacher-ng")
    os.makedirs(cache, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    # A configuration of its own: Debian's remaps the archive to backends this host may not
    # reach (ftp.debian.org); without remaps it fetches from the host the machine asked for.
    conf = os.path.join(workdir, "apt-cacher-ng.conf.d")
    os.makedirs(conf, exist_ok=True)
    with open(os.path.join(conf, "acng.conf"), "w") as f:
        f.write(
            f"CacheDir: {cache}\nLogDir: {logs}\nSupportDir: /usr/lib/apt-cacher-ng\n"
            f"BindAddress: {host_address(net)}\nPort: {port}\n"
            f"SocketPath: {os.path.join(logs, 'socket')}\nPidFile: {os.path.join(logs, 'pid')}\n"
            f"PassThroughPattern: {PASS_THROUGH}\nExThreshold: 0\nForeGround: 1\n"
        )
    log = open(os.path.join(workdir, "apt-cacher-ng.out"), "ab")
    cmd = [_which("apt-cacher-ng") or "apt-cacher-ng", "-c", conf]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)

    def check():
        if proc.poll() is not None:
            raise FreshBedError(f"apt-cacher-ng exited with {proc.returncode}")
        try:
            with socket.create_connection((host_address(net), port), timeout=0.5):
                return True, None
        except OSError:
            return False, None

    try:
        poll_until(check, timeout=30, interval=0.2)
    except BaseException as e:
        stop_pid(proc.pid)  # not yet in the bed's state: down would not find it
        if isinstance(e, PollTimeout):
            raise FreshBedError(f"apt-cacher-ng does not listen on port {port} after 30s") from None
        raise
    return proc, port


def _free_port(addr: str, first: int = 3142, count: int = 200) -> int:
    """A free port of `addr` from 3142 up: apt-cacher-ng cannot bind ports >= 32768
    ("Error resolving address for binding"), so never an ephemeral one."""
    for port in range(first, first + count):
        with socket.socket() as s:
            try:
                s.bind((addr, port))
            except OSError:
                continue
            return port
    raise FreshBedError(f"no free port on {addr} in {first}..{first + count - 1}")


# ----------------------------------------------------------------------------- up/down


def up_machines(
    workdir: str, names: list[str], pub_key: str, cache_dir: str | None = None, state=None
) -> dict:
    """Fresh machines `names` (PKB VMs) under `workdir`; returns their part of the bed state
    (net, proxy, machines: name -> {ns, address, root, sshd pid}). `state` (a dict) is
    filled as things start, so the caller can take them down after a failure."""
    preflight()
    cache_dir = cache_dir or default_cache_dir()
    state = {} if state is None else state
    log = open(os.path.join(workdir, "fresh.log"), "ab")
    tarball = root_tarball(cache_dir, log=log)
    net = claim_net()
    state.update(net=net, machines={}, bridge=bridge_name(net))
    proxy, port = start_proxy(net, workdir, cache_dir)
    state.update(proxy_pid=proxy.pid, proxy=f"http://{host_address(net)}:{port}")
    hosts = "".join(f"{address(net, i)} {n}\n" for i, n in enumerate(names))
    for i, name in enumerate(names):
        ns, addr = ns_name(net, i), address(net, i)
        root = os.path.join(workdir, "machines", name)
        state["machines"][name] = {"ns": ns, "address": addr, "root": root}
        make_namespace(net, i)
        prepare_root(root, tarball, name, addr, hosts, state["proxy"], pub_key)
        proc = start_sshd(ns, root, name, os.path.join(workdir, f"sshd-{name}.log"))
        state["machines"][name]["sshd_pid"] = proc.pid
        wait_ssh(addr, proc)
    return state


def namespace_pids(ns: str) -> list[int]:
    p = _run("ip", "netns", "pids", ns, check=False)
    return [int(x) for x in p.stdout.split()]


def _kill_namespace(ns: str, timeout: float = 10.0) -> None:
    """SIGTERM to every process in `ns` (sshd's sessions close, so PKB's ssh masters end),
    SIGKILL to what remains after `timeout`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = namespace_pids(ns)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + timeout
        while pids and time.time() < deadline:
            _reap()
            pids = namespace_pids(ns)
            time.sleep(0.1)
        if not pids:
            return


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def mounts_under(path: str) -> list[str]:
    path = os.path.realpath(path).rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if (p + "/").startswith(path)]


def down_machines(workdir: str, state: dict) -> None:
    """Stops everything `up_machines` made (recorded in `state`), then removes the roots.
    A root is never removed while anything is mounted below it."""
    for m in state.get("machines", {}).values():
        _kill_namespace(m["ns"])
        _run("ip", "netns", "del", m["ns"], check=False)
    if state.get("proxy_pid"):
        stop_pid(state["proxy_pid"])
    if state.get("bridge"):
        _run("ip", "link", "del", state["bridge"], check=False)
    machines = os.path.join(workdir, "machines")
    left = mounts_under(machines) if os.path.exists(machines) else []
    if left:
        raise FreshBedError(f"mounts remain under {machines}, not removed: {', '.join(left)}")
    if os.path.exists(machines):
        _run("rm", "-rf", "--one-file-system", machines)


def leftovers(state: dict) -> list[str]:
    """What of a bed that went down is still there (namespaces, bridge, processes)."""
    out = []
    names = _run("ip", "netns", "list", check=False).stdout
    for m in state.get("machines", {}).values():
        if re.search(rf"^{re.escape(m['ns'])}\b", names, re.M):
            out.append(f"namespace {m['ns']}")
    if (
        state.get("bridge")
        and _run("ip", "link", "show", state["bridge"], check=False).returncode == 0
    ):
        out.append(f"bridge {state['bridge']}")
    for key in ("proxy_pid",):
        pid = state.get(key)
        if pid and os.path.exists(f"/proc/{pid}"):
            out.append(f"process {pid} ({key})")
    addresses = [m["address"] for m in state.get("machines", {}).values()]
    out += [f"process {pid} ({cmd})" for pid, cmd in processes_naming(addresses)]
    return out


def processes_naming(addresses: list[str], wait: float = 10.0) -> list[tuple[int, str]]:
    """Processes on this host whose command line names a machine's address (PKB's ssh
    ControlMaster processes), after up to `wait` seconds for them to end (their sessions
    closed when the machine's sshd stopped)."""
    alternatives = "|".join(re.escape(a) for a in addresses)
    pattern = re.compile(rf"@({alternatives})\b")
    deadline = time.time() + wait
    while True:
        found = []
        for entry in os.listdir("/proc") if addresses else []:
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            if pattern.search(cmd) and not cmd.startswith("ps "):
                found.append((int(entry), cmd[:120]))
        if not found or time.time() >= deadline:
            return found
        time.sleep(0.5)
