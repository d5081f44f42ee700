"""The settings schema: one typed parser for the CLI's --set and PKB's
--mongodb_perftables_set, user values winning, skip lists across selections."""

import pytest

from mongobench.driver import docgen
from mongobench.perftables import experiments as exp_mod

FLAG = "--mongodb_perftables_set"


@pytest.fixture(scope="module")
def catalog():
    return exp_mod.load()


def test_every_setting_in_the_yaml_is_declared_and_fits_its_schema(catalog):
    for e in catalog.values():
        for params in [e.settings, *e.variants]:
            for key, value in params.items():
                exp_mod.check_setting(key, value, f"{e.name}")  # raises when it does not fit
    assert exp_mod.SETTINGS["id_type"].choices == docgen.ID_TYPES


def test_values_are_typed_like_yaml_scalars():
    got = exp_mod.parse_overrides(
        [
            "threads=32",
            "doc_size_kb=0.5",
            "upsert=true",
            "write_concern=majority",
            "write_concern=1",
            "disk_iops=3000",
            "disk_type=gp3",
            "instance_type=123",
            "price_per_hour=1.27",
            "shard_key=_id:hashed",
        ],
        FLAG,
    )
    assert got == {
        "threads": 32,
        "doc_size_kb": 0.5,
        "upsert": True,
        "write_concern": 1,
        "disk_iops": 3000,
        "disk_type": "gp3",
        "instance_type": 123,
        "price_per_hour": 1.27,
        "shard_key": "_id:hashed",
    }
    assert isinstance(exp_mod.parse_overrides(["total_docs=3e2"])["total_docs"], int)


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        (
            "bogus_key=5",
            r"--mongodb_perftables_set: unknown setting 'bogus_key'; known settings:.*threads",
        ),
        ("threads=-4", r"--mongodb_perftables_set: threads=-4 is not an integer in \[1, 10000\]"),
        ("threads=0", r"threads=0 is not an integer in \[1"),
        ("threads=abc", r"threads='abc' is not an integer"),
        ("threads=2.5", r"threads=2.5 is not an integer"),
        ("threads=", r"threads needs a value"),
        ("total_docs=-1", r"total_docs=-1 is not an integer"),
        ("doc_size_kb=0", r"doc_size_kb=0 is not a number in \[0.0625, 16000\]"),
        ("upsert=maybe", r"upsert='maybe' is not true or false"),
        ("id_type=guid", r"id_type='guid' is not one of objectid, uuid, business_id"),
        ("read_proportion=2", r"read_proportion=2 is not a number in \[0, 1\]"),
        ("write_concern=-1", r"write_concern=-1 is not a write concern"),
        ("threads", r"takes key=value, not 'threads'"),
        ("=5", r"takes key=value, not '=5'"),
    ],
)
def test_bad_settings_name_the_flag_key_and_value(pair, expected):
    with pytest.raises(exp_mod.ExperimentError, match=expected):
        exp_mod.parse_overrides([pair], FLAG)


def test_total_docs_override_wins_and_is_not_scaled_in_every_experiment(catalog):
    # insert_batchsize: no variant sets total_docs (this crashed: str * float).
    overrides = exp_mod.parse_overrides(["total_docs=300"], FLAG)
    batch = exp_mod.plan(catalog, ["insert_batchsize"], "full", overrides=overrides)
    assert {v.settings["total_docs"] for v in batch[0][1]} == {300}
    # insert_docsize: every variant sets total_docs (this was silently ignored).
    docsize = exp_mod.plan(catalog, ["insert_docsize"], "full", overrides=overrides)
    assert [v.settings["total_docs"] for v in docsize[0][1]] == [300] * 5
    assert [v.label for v in docsize[0][1]] == ["1", "4", "32", "256", "2048"]
    # what the user set is what runs at every scale (it was scaled: 150 at 0.5)
    half = exp_mod.plan(catalog, ["insert_docsize"], 0.5, overrides=overrides)
    assert [v.settings["total_docs"] for v in half[0][1]] == [300] * 5
    smoke = exp_mod.plan(
        catalog, ["insert_docsize"], "smoke", overrides={"duration_s": 50, "total_docs": 300}
    )
    assert {v.settings.get("duration_s") for v in smoke[0][1]} == {50}


def test_plan_rejects_mistyped_overrides_given_as_a_dict(catalog):
    with pytest.raises(exp_mod.ExperimentError, match="threads='abc'"):
        exp_mod.plan(catalog, ["insert_docsize"], "smoke", overrides={"threads": "abc"})


def test_hardware_labels_and_shard_settings_are_accepted(catalog):
    overrides = {
        "instance_type": "Atlas M30",
        "disk_type": "STANDARD 100 GB",
        "disk_iops": 3000,
        "price_per_hour": 0.54,
        "sharded": True,
        "shard_key": "_id:hashed",
    }
    ((e, vs),) = exp_mod.plan(catalog, ["insert_iops"], "smoke", overrides=overrides)
    assert [v.label for v in vs] == ["STANDARD 100 GB, 3000"]


def test_skip_entries_of_unselected_experiments_are_ignored(catalog):
    skip = "update_fields/50, 500000, pipeline;insert_docsize/2048"
    ((e, vs),) = exp_mod.plan(catalog, ["insert_docsize"], "smoke", skip=skip)
    assert [v.label for v in vs] == ["1", "4", "32", "256"]
    ((e, vs),) = exp_mod.plan(catalog, ["delete"], "smoke", skip=skip)
    assert len(vs) == 2


@pytest.mark.parametrize(
    "skip", ["insert_docsize/3", "nope/1", "update_fields/50, 500000, pipelined"]
)
def test_skip_entries_that_exist_nowhere_are_errors(catalog, skip):
    with pytest.raises(exp_mod.ExperimentError, match=f"skip names unknown variant.*{skip}"):
        exp_mod.plan(catalog, ["insert_docsize"], "smoke", skip=skip)
