"""The one mongod/mongos configuration builder, TLS settings, and each instance's port and paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import yaml

from mongobench.deploy.hostsettings import mongod_environment
from mongobench.deploy.install import parse_version, series
from mongobench.remote import processes

# Config-file settings removed from mongod, with the version that removed them
# (configuration-file-settings-command-line-options-mapping, "ChangeLog").
REMOVED_OPTIONS = {
    "storage.journal.enabled": (6, 1),
    "net.serviceExecutor": (5, 0),
    "storage.indexBuildRetry": (4, 4),
    "storage.mmapv1": (4, 2),
    "storage.repairPath": (4, 2),
    "replication.secondaryIndexPrefetch": (4, 2),
}

WIREDTIGER_MIN_CACHE_GB = 0.25

# net.tls.* (configuration-options, "net.tls Options"): new in 4.2, replacing net.ssl.*
# (deprecated since 4.2, still accepted). Older servers refuse the tls names.
TLS_SINCE = (4, 2)
TLS_MODES = ("disabled", "allowTLS", "preferTLS", "requireTLS")


def _flatten(doc: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        out[key] = v
    return out


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def validate_config(config: dict, version: str) -> None:
    """Raises ValueError for settings the given mongod version no longer accepts."""
    ver = parse_version(version)[:2]
    flat = _flatten(config)
    for key, removed_in in REMOVED_OPTIONS.items():
        if key in flat and ver >= removed_in:
            raise ValueError(
                f"{key} was removed in MongoDB {removed_in[0]}.{removed_in[1]};"
                f" mongod {series(version)} refuses to start with it"
            )
    if (config.get("processManagement") or {}).get("fork"):
        raise ValueError("processManagement.fork: instances are tracked by PID, do not fork")
    _validate_tls(config.get("net") or {}, ver)


def _validate_tls(net: dict, ver: tuple[int, ...]) -> None:
    tls = net.get("tls")
    if tls is None:
        return
    if ver < TLS_SINCE:
        raise ValueError(
            f"net.tls.* is new in MongoDB {TLS_SINCE[0]}.{TLS_SINCE[1]}; older mongod uses net.ssl.*"
        )
    if "ssl" in net:
        raise ValueError("net.tls and net.ssl (its deprecated alias) must not be mixed")
    mode = tls.get("mode", "disabled")
    if mode not in TLS_MODES:
        raise ValueError(f"net.tls.mode must be one of {TLS_MODES}, got {mode!r}")
    if mode != "disabled" and not tls.get("certificateKeyFile"):
        raise ValueError(f"net.tls.mode {mode} needs net.tls.certificateKeyFile")


def tls_settings(
    certificate_key_file: str,
    *,
    mode: str = "requireTLS",
    ca_file: str | None = None,
    allow_connections_without_certificates: bool = True,
) -> dict:
    """The `net` part of a config that serves TLS with `certificate_key_file` (one PEM file:
    the certificate, then its unencrypted PKCS#8 key, as mongod and FIPS mode want it).

    Without `ca_file` mongod asks clients for no certificate. With it, mongod validates client
    certificates against that CA and refuses clients without one unless
    net.tls.allowConnectionsWithoutCertificates, true by default here: the
    benchmark's clients authenticate, if at all, by password, not by certificate."""
    tls: dict = {"mode": mode, "certificateKeyFile": certificate_key_file}
    if ca_file:
        tls["CAFile"] = ca_file
        tls["allowConnectionsWithoutCertificates"] = bool(allow_connections_without_certificates)
    _validate_tls({"tls": tls}, TLS_SINCE)
    return {"tls": tls}


def mongod_config(
    instance: int,
    port: int,
    dbpath: str,
    logpath: str,
    options: InstanceOptions,
    *,
    version: str,
    tls: dict | None = None,
) -> dict:
    """The config document of mongod instance number `instance` on its host, valid for `version`.

    No processManagement.fork (the runner records the PID of the process it
    starts) and no storage.journal.* (journaling is always on; the `enabled`
    option is gone since 6.1). `tls` is a `tls_settings` result (net.tls.*).
    `options` gives the cache (1 GB when not given), bind address, replica set, role
    ("mongod", or "shardsvr"/"configsvr": sharding.clusterRole) and `extra`, merged last and
    validated too (its config_db and certificate file are instance_config's business).
    """
    cache_gb = 1.0 if options.cache_gb is None else options.cache_gb
    bind_ip, replset, extra = options.bind_ip, options.replset, options.extra
    cluster_role = None if options.role == "mongod" else options.role
    if cache_gb < WIREDTIGER_MIN_CACHE_GB:
        raise ValueError(
            f"instance {instance}: cache_gb must be >= {WIREDTIGER_MIN_CACHE_GB} (WiredTiger minimum)"
        )
    if cluster_role not in (None, "configsvr", "shardsvr"):
        raise ValueError(f"cluster_role must be configsvr or shardsvr, not {cluster_role!r}")
    if cluster_role and not replset:
        raise ValueError("config servers and shards must be replica sets (replset required)")
    config: dict = {
        "storage": {
            "dbPath": dbpath,
            "wiredTiger": {"engineConfig": {"cacheSizeGB": round(float(cache_gb), 2)}},
        },
        "systemLog": {"destination": "file", "path": logpath, "logAppend": True},
        "net": {"port": int(port), "bindIp": bind_ip},
    }
    if replset:
        config["replication"] = {"replSetName": replset}
    if cluster_role:
        config["sharding"] = {"clusterRole": cluster_role}
    if tls:
        config = _merge(config, {"net": tls})
    if extra:
        config = _merge(config, dict(extra))
    validate_config(config, version)
    return config


def mongos_config(port: int, config_db: str, logpath: str, bind_ip: str, *, version: str) -> dict:
    """mongos: sharding.configDB 'cfgRS/h1:p,h2:p,...'; no storage section (mongos has none)."""
    config = {
        "sharding": {"configDB": config_db},
        "systemLog": {"destination": "file", "path": logpath, "logAppend": True},
        "net": {"port": int(port), "bindIp": bind_ip},
    }
    validate_config(config, version)
    return config


def render_config(config: dict, instance: int | None = None) -> str:
    head = f"# mongobench instance {instance}\n" if instance is not None else ""
    return head + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


FIRST_PORT = 27017


# ----------------------------------------------------------------------------- mongod instances


def instance_port(index: int, first_port: int = FIRST_PORT) -> int:
    return first_port + index


@dataclass(frozen=True)
class InstancePaths:
    root: str
    dbpath: str
    log: str
    config: str
    pid_file: str
    stdout: str


def instance_paths(index: int, base_dir: str) -> InstancePaths:
    root = f"{base_dir.rstrip('/')}/mongod-{index}"
    return InstancePaths(
        root=root,
        dbpath=f"{root}/data",
        log=f"{root}/mongod.log",
        config=f"{root}/mongod.conf",
        pid_file=f"{root}/mongod.pid",
        stdout=f"{root}/mongod.stdout",
    )


@dataclass(frozen=True)
class InstanceOptions:
    """What a mongod or mongos config says besides its paths and port: the WiredTiger cache
    (None: 1 GB), bind address, role ("mongod", "shardsvr", "configsvr" or "mongos"), replica
    set, the config servers of a mongos ('cfgRS/host:port,...'), a TLS certificate-key file
    (net.tls, requireTLS) and `extra` settings merged last."""

    cache_gb: float | None = None
    bind_ip: str = "127.0.0.1"
    role: str = "mongod"
    replset: str | None = None
    config_db: str | None = None
    tls_certificate_key_file: str | None = None
    extra: Mapping | None = None


def instance_config(
    index: int,
    options: InstanceOptions = InstanceOptions(),
    *,
    base_dir: str,
    version: str,
    first_port: int = FIRST_PORT,
    port: int | None = None,
) -> str:
    """The YAML config of instance `index` under `base_dir`, valid for `version` (no
    storage.journal.enabled, gone since 6.1; no fork, the runner tracks PIDs): port `port`
    (default first_port+index), its own dbPath and log, the WiredTiger cache (`cache_gb`, 1 GB
    when not given), net.tls (requireTLS) with a certificate-key file when given.

    `role` "mongod" (plain or replica-set member with `replset`), "shardsvr"/"configsvr"
    (sharding.clusterRole; `replset` required) or "mongos" (needs `config_db`
    'cfgRS/host:port,...'; no storage section, `extra` does not apply): all in `options`."""
    o = options
    paths = instance_paths(index, base_dir)
    port = instance_port(index, first_port) if port is None else int(port)
    tls = tls_settings(o.tls_certificate_key_file) if o.tls_certificate_key_file else None
    if o.role == "mongos":
        if not o.config_db:
            raise ValueError("a mongos needs config_db ('cfgRS/host:port,...')")
        config = mongos_config(port, o.config_db, paths.log, o.bind_ip, version=version)
        if tls:
            config["net"].update(tls)
            validate_config(config, version)
    else:
        config = mongod_config(
            index,
            port,
            paths.dbpath,
            paths.log,
            replace(o, cache_gb=o.cache_gb or 1.0),
            version=version,
            tls=tls,
        )
    return render_config(config, index)


def start_command(
    binary: str,
    paths: InstancePaths,
    *,
    version: str,
    numactl: tuple[str, ...] | list[str] = (),
    run_as: str | None = None,
) -> str:
    """Starts mongod or mongos (`binary`) detached with its config and PID file: root only
    to raise its limits (production notes: 64000 open files and processes), then `run_as`;
    its environment has what the production notes ask for on `version`
    (hostsettings.mongod_environment: GLIBC_TUNABLES=glibc.pthread.rseq=0 on 8.0+, or
    TCMalloc's per-CPU caches stay off on glibc >= 2.35)."""
    return processes.background_command(
        [*numactl, binary, "--config", paths.config],
        processes.Launch(
            pid_file=paths.pid_file,
            stdout=paths.stdout,
            sudo=True,
            run_as=run_as,
            nofile=64000,
            nproc=64000,
            env=mongod_environment(version),
        ),
    )
