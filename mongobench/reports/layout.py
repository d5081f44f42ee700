"""The tables' layout, declared per experiment as data (`layout:` in perftables.yaml).

    layout:
      labels:                   # the label columns, in order: one per label setting
        - {setting: threads, header: Num Threads}
        - {setting: id_type, header: Primary Key format, values: {objectid: OBJECT_ID}}
        - {name: disk_spec, header: Disk Specification, format: ["{disk_type} ({disk_iops})"]}
      sort: [index_update, threads, -function, {id_type: [OBJECT_ID, UUID]}]
      tables:
        Performance:
          columns: [label, time_s, {ops_per_s: Update Speed (docs/s)}]   # the seed's, in order
          headers: {threads: Threads}                                   # this table's headers
          extra: [p99_latency_ms, errors]                               # the project's, after
      plot: {x: limit, lines: [{setting: query_type, pattern: "(not cached|cached)$"}]}
      # plot: {y: mb_per_s}     # the plotted figure (default: the throughput the tables show)

A column is a figure (a key of results.COLUMNS) or a label column; `label` in a list stands
for every label column. `sort` is the seed's $sort (`-` descending; a list gives an explicit
order of displayed values); without one, rows keep the run's order (the seed's start_time).
Values are written as the seed writes them: booleans `true`/`false`, integers without a
decimal point, `values` maps a setting's value to the seed's spelling.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mongobench.core.markdown import NA
from mongobench.reports.results import COLUMNS

# The throughput figures, in the order a plot prefers them.
THROUGHPUT_KEYS = ("docs_per_s", "ops_per_s", "insert_ops_per_s", "find_ops_per_s")
P99_KEY = "p99_latency_ms"
LABEL = "label"  # stands for every label column in a table's column list


class LayoutError(ValueError):
    """A bad `layout:` declaration."""


# ----------------------------------------------------------------------------- values


def canon(value):
    """A metadata value, from JSON or PKB's label text ("True", "4", "None"), as bool, int,
    float, str or None (missing)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _number(float(value)) if not isinstance(value, int) else value
    text = str(value).strip()
    low = text.lower()
    if low in ("", "none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return _number(float(text))
    except ValueError:
        return text


def _number(f: float):
    if math.isnan(f):
        return None
    return int(f) if f.is_integer() else f


def spell(value) -> str:
    """A canonical value as the seed writes it: true/false, 4 (not 4.0), 0.0625."""
    if value is None:
        return NA
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# ----------------------------------------------------------------------------- declaration


@dataclass(frozen=True)
class LabelColumn:
    """A label column: a setting's value (spelt through `values`), the first of `formats`
    whose fields the metadata all has, or a `pattern`'s first group over a setting."""

    name: str
    header: str
    setting: str | None = None
    values: Mapping = field(default_factory=dict)
    formats: tuple[str, ...] = ()
    pattern: str | None = None

    def raw(self, md: Mapping):
        """The canonical value before spelling (numbers stay numbers, for axes and sorting)."""
        if self.formats:
            for fmt in self.formats:
                names = [f for _, f, _, _ in string.Formatter().parse(fmt) if f]
                got = {n: canon(md.get(n)) for n in names}
                if all(v is not None for v in got.values()):
                    return fmt.format(**{n: spell(v) for n, v in got.items()})
            return None
        # a label key the scale changed: the full-scale value its label names
        value = canon(md.get(f"nominal_{self.setting}", md.get(self.setting)))
        if self.pattern is not None:
            m = re.search(self.pattern, "" if value is None else str(value))
            return canon(m.group(1)) if m else None
        return value

    def cell(self, md: Mapping) -> str:
        value = self.raw(md)
        # Keys of `values` are spelt too: YAML's true/4 and the metadata's "True"/"4.0" meet.
        text = self.values.get(spell(value), spell(value))
        real = md.get(f"ran_as_{self.setting}") if self.setting and not self.pattern else None
        # the scale made the setting run as another value (perftables.experiments.RAN_AS)
        return f"{text} (ran as {spell(canon(real))})" if real is not None else text


@dataclass(frozen=True)
class Table:
    heading: str
    columns: tuple[str, ...]  # the seed's (or the project's own table's), label columns expanded
    extra: tuple[str, ...]  # the project's, after
    headers: Mapping[str, str]  # column -> header in this table (the seed's wording)

    @property
    def all_columns(self) -> tuple[str, ...]:
        return self.columns + self.extra


@dataclass(frozen=True)
class SortKey:
    column: str
    descending: bool = False
    order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Layout:
    labels: tuple[LabelColumn, ...]
    tables: tuple[Table, ...]
    sort: tuple[SortKey, ...] = ()
    x: LabelColumn | None = None  # the plot's x axis (None: the first numeric label column)
    lines: tuple[LabelColumn, ...] | None = None  # the plot's line settings (None: the others)
    plot_x_declared: bool = False
    y: str | None = None  # the plot's figure (a results.COLUMNS key; None: the throughput)

    def label(self, name: str) -> LabelColumn | None:
        return next((c for c in self.labels if c.name == name), None)

    def header(self, table: Table, column: str) -> str:
        if column in table.headers:
            return table.headers[column]
        lab = self.label(column)
        return lab.header if lab else COLUMNS[column].header

    def figure_header(self, key: str) -> str:
        """A figure's header as the first table showing it words it (the seed's wording)."""
        tab = next((t for t in self.tables if key in t.all_columns), None)
        return self.header(tab, key) if tab else COLUMNS[key].header

    def figures(self) -> list[str]:
        """Every figure the tables show, in table order."""
        out: list[str] = []
        for t in self.tables:
            out += [c for c in t.all_columns if c in COLUMNS and c not in out]
        return out

    def throughput_key(self, rows: Iterable[Mapping]) -> str | None:
        """The throughput figure a plot shows: the first the tables list that the rows have."""
        rows = list(rows)
        keys = [k for k in self.figures() if k in THROUGHPUT_KEYS] + list(THROUGHPUT_KEYS)
        return next((k for k in keys if any(k in r for r in rows)), None)

    def sort_key(self, md: Mapping) -> tuple:
        out = []
        for key in self.sort:
            col = self.label(key.column)
            shown = col.cell(md)
            if key.order:
                rank = key.order.index(shown) if shown in key.order else len(key.order)
                out.append((rank, _order(col.raw(md), shown)))
            else:
                o = _order(col.raw(md), shown)
                out.append(_Desc(o) if key.descending else o)
        return tuple(out)


def _order(raw, shown: str) -> tuple:
    # MongoDB's order across types: missing < numbers < strings < booleans.
    if raw is None:
        return (0, 0, "")
    if isinstance(raw, bool):
        return (3, int(raw), "")
    if isinstance(raw, (int, float)) and shown == spell(raw):
        return (1, raw, "")
    return (2, 0, shown)


class _Desc:
    """Reverses the order of the value it wraps (a descending sort key)."""

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        return other.value < self.value

    def __eq__(self, other):
        return self.value == other.value


# ----------------------------------------------------------------------------- parsing


def of(experiment) -> Layout:
    """The layout of a perftables.experiments.Experiment (its `layout` mapping)."""
    return parse(experiment.layout or {}, experiment.label, experiment.name)


def parse(spec: Mapping, label_settings: Sequence[str] = (), where: str = "layout") -> Layout:
    """A `layout:` mapping -> Layout; LayoutError naming `where` for anything unknown."""
    if not isinstance(spec, Mapping):
        raise LayoutError(f"{where}: layout must be a mapping")
    unknown = set(spec) - {"labels", "sort", "tables", "plot"}
    if unknown:
        raise LayoutError(f"{where}: unknown layout key(s) {', '.join(sorted(unknown))}")
    raw_labels = spec.get("labels") or [{"setting": s, "header": s} for s in label_settings]
    labels = tuple(_label_column(c, where) for c in raw_labels)
    names = [c.name for c in labels]
    if len(set(names)) != len(names):
        raise LayoutError(f"{where}: label columns repeat a name: {names}")
    tables = tuple(
        _table(heading, t, names, where) for heading, t in (spec.get("tables") or {}).items()
    )
    sort = tuple(_sort_key(s, names, where) for s in spec.get("sort") or ())
    plot = spec.get("plot") or {}
    if set(plot) - {"x", "lines", "y"}:
        raise LayoutError(f"{where}: plot takes x, lines and y, not {sorted(plot)}")
    if plot.get("y") is not None and plot["y"] not in COLUMNS:
        raise LayoutError(f"{where}: plot y {plot['y']!r} is not a figure")
    by_name = {c.name: c for c in labels}

    def column(c):
        return by_name[c] if isinstance(c, str) and c in by_name else _label_column(c, where)

    x = column(plot["x"]) if plot.get("x") else None
    lines = tuple(column(c) for c in plot["lines"]) if "lines" in plot else None
    return Layout(labels, tables, sort, x, lines, "x" in plot, plot.get("y"))


def _label_column(c, where: str) -> LabelColumn:
    if isinstance(c, str):
        return LabelColumn(name=c, header=c, setting=c)
    if not isinstance(c, Mapping) or set(c) - {
        "name",
        "setting",
        "header",
        "values",
        "format",
        "pattern",
    }:
        raise LayoutError(f"{where}: a label column is a setting name or a mapping, not {c!r}")
    formats = c.get("format") or ()
    formats = (formats,) if isinstance(formats, str) else tuple(formats)
    setting = c.get("setting")
    name = c.get("name") or setting
    if not name or not (setting or formats):
        raise LayoutError(f"{where}: label column {c!r} needs a setting or a format (and a name)")
    if c.get("pattern") is not None:
        try:
            if re.compile(c["pattern"]).groups < 1:
                raise LayoutError(f"{where}: pattern {c['pattern']!r} has no group")
        except re.error as e:
            raise LayoutError(f"{where}: bad pattern {c['pattern']!r}: {e}") from None
    values = {spell(canon(k)): str(v) for k, v in (c.get("values") or {}).items()}
    return LabelColumn(name, str(c.get("header", name)), setting, values, formats, c.get("pattern"))


def _table(heading: str, t, labels: Sequence[str], where: str) -> Table:
    if isinstance(t, list):
        t = {"columns": t}
    if not isinstance(t, Mapping) or set(t) - {"columns", "extra", "headers"}:
        raise LayoutError(f"{where}: table {heading!r} takes columns, extra and headers")
    headers = {str(k): str(v) for k, v in (t.get("headers") or {}).items()}

    def expand(items) -> list[str]:
        out = []
        for item in items or ():
            if isinstance(item, Mapping):  # {key: header}: this table's wording
                ((key, header),) = item.items()
                headers[key] = str(header)
                item = key
            out += list(labels) if item == LABEL else [item]
        return out

    columns, extra = expand(t.get("columns")), expand(t.get("extra"))
    bad = [c for c in columns + extra if c not in COLUMNS and c not in labels]
    if bad:
        raise LayoutError(f"{where}: table {heading!r}: unknown column(s) {', '.join(bad)}")
    if set(headers) - set(columns + extra):
        raise LayoutError(f"{where}: table {heading!r}: headers for columns it does not show")
    return Table(heading, tuple(columns), tuple(extra), headers)


def _sort_key(s, labels: Sequence[str], where: str) -> SortKey:
    if isinstance(s, Mapping):
        ((column, order),) = s.items()
        key = SortKey(column, order=tuple(str(v) for v in order))
    else:
        s = str(s)
        key = SortKey(s.lstrip("-"), descending=s.startswith("-"))
    if key.column not in labels:
        raise LayoutError(f"{where}: sort names {key.column!r}, not a label column")
    return key


# ----------------------------------------------------------------------------- plots


# A numeric setting with fewer values (0 % or 50 % new keys) is two categories: bars.
MIN_LINE_POINTS = 3


def is_numeric(values: Iterable) -> bool:
    values = [v for v in values if v is not None]
    return bool(values) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    )


def plot_axes(layout: Layout, mds: Sequence[Mapping]) -> tuple[LabelColumn | None, tuple]:
    """(x column, line columns): the declared ones, else the first label column whose values
    are all numbers, and at least MIN_LINE_POINTS of them, as x and the other label columns
    as lines; (None, labels) when none is: categories are grouped bars, not lines."""

    def numeric_axis(c: LabelColumn) -> bool:
        values = [c.raw(md) for md in mds]
        return is_numeric(values) and len({v for v in values if v is not None}) >= MIN_LINE_POINTS

    x = layout.x
    if x is None and not layout.plot_x_declared:
        x = next((c for c in layout.labels if numeric_axis(c)), None)
    if x is not None and not numeric_axis(x):
        x = None
    lines = layout.lines
    if lines is None:
        lines = tuple(c for c in layout.labels if x is None or c.name != x.name)
    return x, lines


# ----------------------------------------------------------------------------- rows


def ordered(layout: Layout, rows: Mapping) -> list[Mapping]:
    """Rows (report.group's: key (run, variant_index, variant) -> row) in the seed's order:
    run, then the layout's sort, then the run's order of variants."""
    items = sorted(rows.items(), key=lambda kv: (kv[0][0], layout.sort_key(kv[1]["_md"]), kv[0][1]))
    return [row for _, row in items]


def prepare(rows: Mapping, label_settings: Sequence[str]) -> dict:
    """report.group's rows of one experiment, each with `_run` (its run_uri) and its label
    settings completed (with_label_settings)."""
    return {
        k: {**row, "_md": with_label_settings(row["_md"], label_settings), "_run": k[0]}
        for k, row in rows.items()
    }


def with_label_settings(md: Mapping, label_settings: Sequence[str]) -> dict:
    """`md` with the variant's label settings it lacks taken from its label ("10, False"):
    samples written with only experiment/variant metadata still fill their label columns."""
    out = dict(md)
    missing = [k for k in label_settings if canon(out.get(k)) is None]
    variant = str(out.get("variant", ""))
    parts = [variant] if len(label_settings) == 1 else variant.split(", ")
    if missing and len(parts) == len(label_settings):
        for key, part in zip(label_settings, parts, strict=True):
            if key in missing:
                out[key] = part
    return out
