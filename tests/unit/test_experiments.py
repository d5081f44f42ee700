import pytest

from mongobench.perftables import experiments as exp_mod


@pytest.fixture(scope="module")
def catalog():
    return exp_mod.load()


def test_seed_matrix_of_insert_docsize_at_full_scale(catalog):
    variants = catalog["insert_docsize"].resolve("full")
    assert [v.label for v in variants] == ["1", "4", "32", "256", "2048"]
    # Every variant is 24 GiB nominal, as in the seed.
    for v in variants:
        assert v.settings["doc_size_kb"] * v.settings["total_docs"] == 24 * 1024 * 1024
        assert v.settings["threads"] == 10


def test_scale_shrinks_sizes_but_respects_minimums(catalog):
    full = {v.label: v.settings for v in catalog["insert_docsize"].resolve("full")}
    smoke = {v.label: v.settings for v in catalog["insert_docsize"].resolve("smoke")}
    assert smoke["1"]["total_docs"] == pytest.approx(full["1"]["total_docs"] * 1.2e-4, abs=1)
    assert smoke["2048"]["total_docs"] == 10  # the floor, not 1.47
    assert smoke["1"]["batch_size"] == full["1"]["batch_size"]  # not a scaled setting


def test_user_overrides_win_over_shared_and_variant_settings(catalog):
    e = catalog["insert_batchsize"]
    v = e.resolve(0.5, overrides={"threads": 3})
    assert [x.settings["batch_size"] for x in v] == [1, 10, 100, 1000, 2000]
    assert all(x.settings["threads"] == 3 for x in v)
    assert v[0].settings["total_docs"] == 6291456 // 2
    # An override of what the variants differ in makes them one variant, run once.
    same = e.resolve(0.5, overrides={"batch_size": 7})
    assert [(x.label, x.settings["batch_size"]) for x in same] == [("7", 7)]


@pytest.mark.parametrize("bad", ["huge", "0", "-1", "1.5", 0, 2])
def test_bad_scale_is_a_clear_error(bad):
    with pytest.raises(exp_mod.ExperimentError, match="scale"):
        exp_mod.parse_scale(bad)


def test_unknown_names_are_reported(catalog):
    with pytest.raises(exp_mod.ExperimentError, match="nope.*known: insert_docsize"):
        exp_mod.select(catalog, ["insert_docsize", "nope"])
    variants = catalog["insert_idtype"].resolve("smoke")
    with pytest.raises(exp_mod.ExperimentError, match="guid"):
        exp_mod.plan(catalog, ["insert_idtype"], "smoke", ["guid"])
    assert [v.label for v in exp_mod.filter_variants(variants, ["uuid"])] == ["uuid"]


def test_every_experiment_names_a_registered_workload_and_known_columns(catalog):
    from mongobench.driver.catalog import WORKLOADS
    from mongobench.reports import layout

    for e in catalog.values():
        assert e.workload in WORKLOADS, e.name
        lay = layout.of(e)  # raises LayoutError for a column that is no figure or label
        assert lay.tables, e.name
        names = [c.name for c in lay.labels]
        for t in lay.tables:
            assert list(t.columns[: len(names)]) == names, (e.name, t.heading)


def test_bad_file_is_rejected(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("experiments:\n  a: {title: t, section: s, workload: insert}\n")
    with pytest.raises(exp_mod.ExperimentError, match="lacks label, settings, variants"):
        exp_mod.load(path)
