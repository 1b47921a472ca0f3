"""`advisor profiles`: list, show, export and import through the CLI (synthetic profiles)."""

from __future__ import annotations

import json

import pytest

from advisor.cli.main import main
from advisor.profiles import schema as profile_schema
from advisor.profiles import use as profiles
from tests.test_profiles import synthetic


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))


def test_empty_store_says_how_to_fill_it(capsys):
    assert main(["profiles"]) == 0
    assert "advisor calibrate" in capsys.readouterr().out


def test_list_show_export_import(tmp_path, capsys):
    profiles.save_profile(synthetic())
    assert main(["profiles", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == ["h200-test"] and listed[0]["catalog_gpu"] == "H200"
    assert main(["profiles"]) == 0
    assert "h200-test" in capsys.readouterr().out
    assert main(["profiles", "show", "h200-test"]) == 0
    shown = capsys.readouterr().out
    assert "gemm_efficiency.hopper" in shown and "not fitted" in shown
    path = tmp_path / "exported.json"
    assert main(["profiles", "export", "h200-test", "--out", str(path)]) == 0
    assert profiles.parse_profile(path.read_text()) == profile_schema.seal(synthetic())
    assert main(["profiles", "import", str(path), "--name", "again"]) == 0
    assert "stored profile 'again'" in capsys.readouterr().out
    assert {r.name for r in profiles.list_profiles()} == {"h200-test", "again"}


def test_errors_are_one_line_naming_the_field(tmp_path, capsys):
    assert main(["profiles", "show", "missing"]) == 2
    assert capsys.readouterr().err.startswith("advisor: error: profile: no valid profile named 'missing'")
    bad = tmp_path / "bad.json"
    sealed = json.loads(profile_schema.seal(synthetic()).model_dump_json())
    bad.write_text(json.dumps({**sealed, "schema_version": 7}))
    assert main(["profiles", "import", str(bad)]) == 2
    assert "schema_version" in capsys.readouterr().err
    assert main(["validate", "--profile", "missing"]) == 2
