"""Diagnostics kept in PKB's run directory (issue 13 item 3).

A failed run pulls the engine's raw results, mongod's logs and FTDC and the YCSB outputs
into <run directory>/diagnostics/<vm>/ before Cleanup deletes the work directories; a good
run does so with --mongobench_keep_diagnostics. The target's URI file is never among them.
Runs when PKB_DIR names a PKB checkout (see tests/e2e/conftest.py).
"""

import glob
import os

import pytest
import yaml
from pkb_helpers import bed_vm, config_with, failing_variant_flags, run_pkb

from testbed import bed as testbed

pytestmark = pytest.mark.e2e


def kept_files(temp_dir):
    """{path relative to diagnostics/<vm>/: content} of everything the run kept."""
    [run_dir] = glob.glob(str(temp_dir / "runs" / "*"))
    out = {}
    for vm_dir in glob.glob(os.path.join(run_dir, "diagnostics", "*")):
        for root, _, files in os.walk(vm_dir):
            for name in files:
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    out[os.path.relpath(path, vm_dir)] = f.read()
    return out


def test_failed_variant_keeps_the_raw_results_and_no_uri(pkb_python, tmp_path, pkb_temp):
    state, vm, scratch = bed_vm(tmp_path)
    flags = failing_variant_flags(state["uri_file"])
    path = config_with(tmp_path / "p.yaml", "mongodb_perftables", vm, flags)
    try:
        p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp, cloud=True)
    finally:
        testbed.down(str(tmp_path / "tb"))
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "variant(s) failed" in out, out[-3000:]
    kept = kept_files(pkb_temp)
    assert b'"results"' in kept["mongobench/perftables-results.json"], sorted(kept)
    assert not [name for name in kept if name.endswith("target.uri")]
    assert "diagnostics of" in out and "kept in" in out  # the log says where they went
    assert os.listdir(scratch) == []  # then Cleanup removed the work directories


def test_good_run_keeps_mongod_files_when_asked(pkb_python, tmp_path, pkb_temp):
    _, vm, scratch = bed_vm(tmp_path, server="standin")
    flags = {
        "mongodb_perftables_deployment": "standalone",
        "mongobench_mongod_server": "standin",
        "mongodb_perftables_port": testbed.free_port(),
        "mongodb_perftables_scale": "smoke",
        "mongodb_perftables_experiments": "insert_docsize",
        "mongodb_perftables_variants": "1",
        "mongobench_keep_diagnostics": True,
    }
    groups = {"clients": {"static_vms": [dict(vm)]}, "servers": {"static_vms": [dict(vm)]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"mongodb_perftables": {"vm_groups": groups, "flags": flags}}))
    try:
        p = run_pkb(pkb_python, "mongodb_perftables", path, pkb_temp)
    finally:
        testbed.down(str(tmp_path / "tb"))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    kept = kept_files(pkb_temp)
    inst = "mongobench-mongod/instances/mongod-0"
    assert f"{inst}/mongod.conf" in kept and f"{inst}/mongod.stdout" in kept, sorted(kept)
    assert "mongobench/perftables-results.json" in kept
    assert not [name for name in kept if name.endswith("target.uri")]
    # the data files stay behind: only logs, config and diagnostic.data are taken
    assert not [n for n in kept if "/data/" in n and "/diagnostic.data/" not in n]
    assert os.listdir(scratch) == []
