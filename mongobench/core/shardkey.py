"""Shard keys: the `field:kind` spec and the shardCollection command document.

Shared by the deployment (deploy.placement shards the benchmark's collections) and the
workloads (driver.base shards a collection it drops and makes again). Shape:
https://www.mongodb.com/docs/manual/reference/command/shardCollection/
"""

from __future__ import annotations


def parse_shard_key(spec: str | dict) -> dict:
    """'_id:hashed' or 'a:1,b:1' (or a dict) -> {'_id': 'hashed'} / {'a': 1, 'b': 1}."""
    if isinstance(spec, dict):
        key = dict(spec)
    else:
        key = {}
        for part in str(spec).split(","):
            fld, _, kind = part.strip().partition(":")
            if not fld:
                raise ValueError(f"empty field in shard key {spec!r}")
            kind = kind.strip() or "1"
            key[fld.strip()] = "hashed" if kind == "hashed" else int(kind)
    if not key:
        raise ValueError("empty shard key")
    for fld, kind in key.items():
        if kind not in (1, "hashed"):
            raise ValueError(f"shard key field {fld}: must be 1 or 'hashed', not {kind!r}")
    if list(key.values()).count("hashed") > 1:
        raise ValueError("a shard key may contain at most one hashed field")
    return key


def shard_collection_command(namespace: str, key: str | dict, unique: bool = False) -> dict:
    db, _, coll = namespace.partition(".")
    if not db or not coll:
        raise ValueError(f"namespace must be db.collection, not {namespace!r}")
    key_doc = parse_shard_key(key)
    doc = {"shardCollection": namespace, "key": key_doc}
    if unique:
        if "hashed" in key_doc.values():
            raise ValueError("hashed shard keys cannot be unique")
        doc["unique"] = True
    return doc
