"""Which server was tested: the product (mongod, mongos, Atlas, FerretDB and its backend,
Amazon DocumentDB, Azure Cosmos DB, the project's stand-in), its own version and the MongoDB
version it claims, from buildInfo, serverStatus and hello (and the hosts' names for the managed
services, which answer as MongoDB does). Every sample carries these; `compare` warns when the
products differ.
"""

from __future__ import annotations

KEYS = ("server_product", "server_product_version", "server_backend", "server_compat")

STANDIN_PRODUCT = "stand-in (mongo-java-server)"

# Host name suffixes of managed services that speak MongoDB's protocol.
_HOSTS = (
    (".docdb.amazonaws.com", "Amazon DocumentDB"),
    (".docdb-elastic.amazonaws.com", "Amazon DocumentDB (elastic)"),
    (".mongocluster.cosmos.azure.com", "Azure Cosmos DB for MongoDB (vCore)"),
    (".mongo.cosmos.azure.com", "Azure Cosmos DB for MongoDB (RU)"),
    (".cosmos.azure.com", "Azure Cosmos DB for MongoDB"),
    (".mongodb.net", "MongoDB Atlas"),
)


def identify(
    build_info: dict | None,
    status: dict | None,
    hello: dict | None,
    hosts: list[str] | tuple[str, ...] = (),
) -> dict:
    """The KEYS from what the server said (any of the three may be None: not answered)."""
    bi, st, he = build_info or {}, status or {}, hello or {}
    claimed = bi.get("version") or st.get("version")
    wire = he.get("maxWireVersion")
    compat = "unknown"
    if claimed:
        compat = f"MongoDB {claimed}" + (f", wire {wire}" if wire is not None else "")
    process = str(st.get("process") or "")
    product, version, backend = None, None, None
    if bi.get("ferretdbVersion") or st.get("ferretdbVersion"):
        product = "FerretDB"
        version = str(bi.get("ferretdbVersion") or st.get("ferretdbVersion"))
    elif process == "java":  # the project's stand-in (mongo-java-server), data in memory
        product, backend = STANDIN_PRODUCT, "memory"
    else:
        for suffix, name in _HOSTS:
            if any(h.lower().rstrip(".").endswith(suffix) for h in hosts):
                product, version = name, claimed
                break
    if product is None:
        if he.get("msg") == "isdbgrid" or process.startswith("mongos"):
            product = "mongos"
        elif process.startswith("mongod"):
            product = "mongod"
        else:
            product = "unknown"
        version = claimed
    if product in ("mongod", "mongos", "MongoDB Atlas") and "enterprise" in (
        bi.get("modules") or []
    ):
        backend = "enterprise"
    return {
        "server_product": product,
        "server_product_version": str(version) if version else "unknown",
        "server_backend": backend,
        "server_compat": compat,
    }


def backend_from_explain(explain: dict | None) -> str | None:
    """FerretDB's backend from its explain: SQLite's plan is a list of EXPLAIN QUERY PLAN rows,
    PostgreSQL's a JSON plan with node types."""
    plan = ((explain or {}).get("queryPlanner") or {}).get("Plan")
    if isinstance(plan, list):
        return "SQLite"
    if isinstance(plan, dict) and "Node Type" in plan:
        return "PostgreSQL"
    return None


def describe(ident: dict) -> str:
    """One line: `FerretDB v1.24.2 (SQLite), claims MongoDB 7.0.42, wire 21`."""
    out = ident.get("server_product") or "unknown"
    if ident.get("server_product_version") not in (None, "unknown"):
        out += f" {ident['server_product_version']}"
    if ident.get("server_backend"):
        out += f" ({ident['server_backend']})"
    return out + f", claims {ident.get('server_compat') or 'unknown'}"
