"""`perftables list --format json`, key examples and the seed deviations (issue 14 items 1, 4)."""

import json
import pathlib
import re

import pytest

from mongobench import cli
from mongobench.perftables import experiments as exp_mod

SIZE_NAMES = ("preload_docs", "total_docs", "doc_size_kb", "batch_size", "threads", "total_ops")
KEY_SHAPES = {
    "objectid": r"ObjectId\('[0-9a-f]{24}'\)",
    "uuid": r"UUID\('[0-9a-f-]{36}'\)",
    "business_id": r"'ACC\d{5}[0-9a-f]{8}'",
}


@pytest.fixture(scope="module")
def catalog():
    return exp_mod.load()


def _json_list(capsys, *argv) -> dict:
    assert cli.main(["perftables", "list", "--format", "json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_list_has_every_variant_resolved_at_full_scale_by_default(capsys, catalog):
    doc = _json_list(capsys)
    assert (doc["scale"], doc["scale_factor"]) == ("full", 1.0)
    assert [e["name"] for e in doc["experiments"]] == list(catalog)
    by_name = {e["name"]: e for e in doc["experiments"]}
    for name, e in catalog.items():
        got = by_name[name]
        assert [v["label"] for v in got["variants"]] == [v.label for v in e.resolve("full")]
        for v, want in zip(got["variants"], e.resolve("full"), strict=True):
            assert {k: x for k, x in v["settings"].items() if k != "key_example"} == {
                k: x for k, x in want.settings.items() if k != "key_example"
            }
            assert v["settings"]["key_example"]
    idtype = by_name["insert_idtype"]["variants"][0]["settings"]
    assert (idtype["total_docs"], idtype["doc_size_kb"], idtype["batch_size"]) == (
        25165824,
        1,
        1000,
    )
    query = by_name["query_full"]["variants"][0]["settings"]
    assert (query["preload_docs"], query["group_size"]) == (5_000_000, 400)
    names = {k for e in doc["experiments"] for v in e["variants"] for k in v["settings"]}
    assert set(SIZE_NAMES) | {"group_size"} <= names


def test_json_list_at_a_scale_and_the_plain_list_a_variant_a_line(capsys, catalog):
    smoke = _json_list(capsys, "--scale", "smoke")
    docsize = next(e for e in smoke["experiments"] if e["name"] == "insert_docsize")
    assert docsize["variants"][-1]["settings"]["total_docs"] == 10  # the floor at smoke
    assert cli.main(["perftables", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "insert_docsize: Expected insert speed by document size [insert]"
    assert [ln.split()[0] for ln in lines[1:6]] == [
        f"doc_size_kb={kb}" for kb in (1, 4, 32, 256, 2048)
    ]
    n_variants = sum(len(e.resolve("full")) for e in catalog.values())
    assert len(lines) == len(catalog) + n_variants + 1  # headers, variants, the total
    with pytest.raises(SystemExit, match="scale"):
        cli.main(["perftables", "list", "--format", "json", "--scale", "huge"])


def test_key_example_shows_each_variants_key_shape(catalog):
    for v in catalog["insert_idtype"].resolve("full"):
        assert re.fullmatch(KEY_SHAPES[v.settings["id_type"]], v.settings["key_example"]), v
    assert catalog["concurrency"].resolve("full")[0].settings["key_example"] == "0"
    assert catalog["shell_findone_rate"].resolve("full")[0].settings["key_example"] == "100"
    mixed = catalog["shell_mixed"].resolve("full")[0].settings["key_example"]
    assert re.fullmatch(r"100 \(findOne\); ObjectId\('[0-9a-f]{24}'\) \(insert\)", mixed)
    assert catalog["updateapi"].resolve("full")[0].settings["key_example"] == "250000"


def test_key_example_reaches_the_variant_result_metadata(catalog):
    from mongobench.reports import results

    v = catalog["insert_idtype"].resolve("smoke")[0]
    md = results.metadata({"scale": "smoke"}, {"experiment": "insert_idtype", "label": v.label,
                                               "settings": v.settings})  # fmt: skip
    assert re.fullmatch(KEY_SHAPES["business_id"], md["key_example"])


def test_every_experiment_states_where_it_leaves_the_seed(catalog):
    """The values the seeds give differently are explained in the YAML."""
    assert set(catalog["insert_idtype"].deviations) >= {"total_docs", "threads", "business_id"}
    assert "total_docs" in catalog["insert_instancesize"].deviations
    for name in ("shell_insert_rate", "shell_mixed", "shell_bucket"):
        assert "unacknowledged" in catalog[name].deviations["write_concern"]
    assert "n/a" in catalog["shell_bucket"].deviations["paddingFactor"]
    for name in ("update_fields", "replace", "update_indexed", "delete", "aggregation"):
        assert catalog[name].deviations, name


def test_shell_tests_query_id_100_on_the_insert_tests_collection(catalog):
    for name in ("shell_findone_rate", "shell_mixed"):
        s = catalog[name].resolve("full")[0].settings
        assert (s["query"], s["projection"], s["limit"]) == ({"_id": 100}, {"_id": 1}, 1)
        assert s["preload_docs"] == 120_000  # not the 5M query data
    assert catalog["shell_mixed"].resolve("smoke")[0].settings["preload_docs"] >= 101


def test_deviations_must_say_why(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "experiments:\n  x:\n    title: t\n    section: s\n    workload: insert\n"
        "    label: threads\n    settings: {threads: 1}\n    variants: [{}]\n"
        "    deviations: {threads: ''}\n"
    )
    with pytest.raises(exp_mod.ExperimentError, match="deviations"):
        exp_mod.load(bad)


def test_deviations_page_names_every_experiment_with_deviations(catalog):
    readme = (
        pathlib.Path(__file__).resolve().parents[2] / "docs" / "reference" / "deviations.md"
    ).read_text()
    table = readme.split("<!-- deviations:", 1)[1].split("\n\n", 1)[0]
    first_cells = [row.split(" | ")[0] for row in table.splitlines() if row.startswith("| `")]
    named = set(re.findall(r"`([a-z_]+)`", "\n".join(first_cells)))
    assert named == {n for n, e in catalog.items() if e.deviations}


def test_list_takes_experiments_as_run_does(capsys):
    assert cli.main(["perftables", "list", "--experiments", "update_fields,replace"]) == 0
    out = capsys.readouterr().out
    titles = [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert titles[:2] == ["update_fields", "replace"]
    assert "2 experiment(s)" in out and "insert_docsize" not in out
    for bad, said in [("", "--experiments: empty list"), ("nope", "unknown experiment(s) nope")]:
        with pytest.raises(SystemExit, match=re.escape(said)):
            cli.main(["perftables", "list", "--experiments", bad])


def test_a_closed_pipe_ends_the_listing_without_a_traceback():
    import subprocess
    import sys

    # the reader closes at once, as `| head -c 1` does: the listing meets a broken pipe
    p = subprocess.Popen(
        [sys.executable, "-m", "mongobench", "perftables", "list", "--scale", "smoke"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    p.stdout.close()
    assert p.wait(60) in (0, 1)
    assert b"Traceback" not in p.stderr.read()
