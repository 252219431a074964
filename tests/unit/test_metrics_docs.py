"""docs/OPERATIONS.md names the app's metrics as a scrape shows them: every
metric is in its table, and every name its metrics section uses (the table,
the alerts) exists."""

from __future__ import annotations

import re

from prometheus_client import REGISTRY

from messaging.ops import metrics  # noqa: F401  (registers the app's metrics)

from ..support.servers import ROOT

OPERATIONS = ROOT / "docs" / "OPERATIONS.md"
# What a scrape adds to a family's name, per kind of metric.
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


def metrics_section() -> str:
    """From the metrics' table to the end of the alerts' PromQL."""
    text = OPERATIONS.read_text()
    start = text.index("Metrics (all behind")
    alerts = text.index("```promql", start)
    return text[start : text.index("```", alerts + len("```promql"))]


def app_families() -> dict[str, str]:
    """The app's metric families: the name a scrape shows for each (counters with `_total`), by family name."""
    shown = {}
    for family in REGISTRY.collect():
        if family.name.startswith("messaging_"):
            shown[family.name] = family.name + ("_total" if family.type == "counter" else "")
    return shown


def test_the_table_lists_every_metric_as_a_scrape_names_it():
    table = set(re.findall(r"^\| `(messaging_[a-z_]+)` \|", metrics_section(), flags=re.MULTILINE))
    assert table == set(app_families().values())


def test_every_metric_the_doc_names_exists():
    families = app_families()
    scraped = {family + suffix for family in families for suffix in SUFFIXES}
    named = set(re.findall(r"\bmessaging_[a-z_]+\b", metrics_section()))
    assert named - scraped == set()
