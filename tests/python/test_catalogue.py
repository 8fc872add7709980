"""The catalogue of statistics is the one list: the core's (headscope._core.statistics_catalogue),
the Python record (HeadStats), the TypeScript type (web/src/lib/api.ts), the web tests' copy of the
catalogue and docs/schema.md must name the same statistics, in the same order. Also the role label
every frontend shows, written by the core."""
import dataclasses
import json
import re

from conftest import ROOT, TEXT

# Fields of the Python record that are not statistics: where the head is, and what it kept of keys
# it has no field for.
RECORD_ONLY = {"layer", "head", "kv_head", "extra"}
PY_TYPE = {"mean": "float", "count": "int", "offsets": "dict[int, float]"}
TS_TYPE = {"mean": "number | null", "count": "number", "offsets": "Record<string, number | null>"}


def catalogue(headscope):
    return headscope.statistics_catalogue()


def typescript_fields(source: str, interface: str) -> dict[str, str]:
    """name -> type of each field of `export interface <interface> { ... }`."""
    body = re.search(r"export interface " + interface + r" \{\n(.*?)\n\}", source, re.S)
    assert body, f"no interface {interface} in web/src/lib/api.ts"
    fields = {}
    for line in body.group(1).splitlines():
        m = re.match(r"\s*(\w+)\??: ([^;]+);", line)
        if m:
            fields[m.group(1)] = m.group(2).strip()
    return fields


def test_catalogue_entries_are_complete(headscope):
    entries = catalogue(headscope)
    keys = [e["key"] for e in entries]
    assert len(keys) == len(set(keys)) == 26
    for e in entries:
        assert set(e) == {"key", "kind", "label", "unit", "help", "constants"}, e["key"]
        assert e["kind"] in PY_TYPE and e["label"] and e["unit"] and e["help"], e["key"]


def test_python_record_matches_catalogue(headscope):
    fields = [f for f in dataclasses.fields(headscope.HeadStats) if f.name not in RECORD_ONLY]
    # Every statistic has its field, and no field lacks its statistic (the record's order is its own:
    # the counts come last).
    assert sorted(f.name for f in fields) == sorted(e["key"] for e in catalogue(headscope))
    types = {f.name: f.type for f in fields}
    for e in catalogue(headscope):
        assert types[e["key"]] == PY_TYPE[e["kind"]], e["key"]


def test_typescript_type_matches_catalogue(headscope):
    fields = typescript_fields((ROOT / "web" / "src" / "lib" / "api.ts").read_text(), "HeadStats")
    entries = catalogue(headscope)
    assert list(fields) == [e["key"] for e in entries]
    for e in entries:
        assert fields[e["key"]] == TS_TYPE[e["kind"]], e["key"]


def test_web_fixture_is_the_catalogue(headscope):
    # The web tests read this copy; it must be what the core serves.
    source = (ROOT / "web" / "src" / "lib" / "statistics-catalogue.fixture.ts").read_text()
    fixture = json.loads(source.split("StatInfo[] = ", 1)[1].strip().removesuffix(";"))
    assert fixture == catalogue(headscope)


def test_schema_doc_lists_the_catalogue(headscope):
    doc = (ROOT / "docs" / "schema.md").read_text()
    block = re.search(r"## HeadStats\n\n`\{(.*?)\}`", doc, re.S)
    assert block, "docs/schema.md has no HeadStats field list"
    assert [k.strip() for k in block.group(1).split(",")] == [e["key"] for e in catalogue(headscope)]


def test_notebook_payload_carries_the_catalogue(headscope):
    from headscope import views

    data = views._with_catalogue({"schema": views.EMBED_SCHEMA})
    assert data["statistics_catalogue"] == catalogue(headscope)
    assert [r["id"] for r in data["roles"]][0] == "previous_token"


def test_help_quotes_the_constants(headscope):
    by_key = {e["key"]: e for e in catalogue(headscope)}
    fraction = by_key["sparsity"]["constants"]["sparsity_fraction"]
    assert f"{fraction:g} / n" in by_key["sparsity"]["help"]
    cover = by_key["keys_90"]["constants"]["cover_mass"]
    assert f"{cover * 100:g} %" in by_key["keys_90"]["label"]
    window = by_key["local_mass"]["constants"]["local_window"]
    assert isinstance(window, int) and f"±{window} positions" in by_key["local_mass"]["label"]


def test_record_keeps_unknown_keys(headscope):
    from headscope import _stats_of

    head = {"layer": 0, "head": 1, "kv_head": 1, "stats": {}}
    for e in catalogue(headscope):
        head["stats"][e["key"]] = {"0": 0.5} if e["kind"] == "offsets" else 1
    head["stats"]["a_new_statistic"] = 0.25
    (s,) = _stats_of([head])
    assert s.extra == {"a_new_statistic": 0.25}
    assert s.offset_mass == {0: 0.5} and s.n_queries == 1 and s.sparsity == 1.0


def test_role_label_is_name_and_detail(minilm):
    roles = minilm.run(TEXT).roles()
    for r in roles:
        assert r.label == (f"{r.name} {r.detail}" if r.detail else r.name)
    doc = json.loads(minilm.run(TEXT).json())
    for h in doc["heads"]:
        for s in [h["roles"]["primary"], h["roles"]["secondary"], *h["roles"]["scores"]]:
            assert s["label"] == (f"{s['name']} {s['detail']}" if s["detail"] else s["name"])
