"""The profile store (advisor/profiles/use.py): round trips, matching, priors, and reliability under
concurrent writers and a writer killed with SIGKILL in the middle of a write.

The profiles here are synthetic (hand-written overrides, labelled as such): they exercise the
store, not the hardware. Real CPU-mode profiles come from tests/test_calibration.py.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from advisor.core.errors import AdvisorError, InvalidInput
from advisor.core.priors import default_priors
from advisor.profiles import schema as profile_schema
from advisor.profiles import store as profile_store
from advisor.profiles import use as profiles

H200_BYTES = 150_754_820_096  # torch's total_memory for an H200 (140.4 GiB)


def synthetic(name: str = "h200-test", gpu: str | None = "H200", per_node: int = 8, nodes: int = 1,
              padding_bytes: int = 0) -> profile_schema.Profile:
    """A valid profile with two fitted terms (values invented for the store tests only)."""
    curve = {"x": [1024.0, 8192.0], "y": [0.30, 0.60]}
    return profile_schema.Profile(
        name=name, created_at="2026-11-30T00:00:00+00:00",
        fingerprint=profile_schema.Fingerprint(device="cuda", gpu_name=f"NVIDIA {gpu or 'X1'}",
                                         gpu_memory_bytes=H200_BYTES, gpus_per_node=per_node,
                                         nodes=nodes, torch="2.13.0"),
        catalog_gpu=gpu, device_spec=None, quick=True,
        command="synthetic (tests/test_profiles.py)",
        overrides={"gemm_efficiency": {"hopper": curve}, "collective": {"intra_efficiency": 0.5}},
        fit=[profile_schema.FitTerm(term="gemm_efficiency.hopper", value=curve["y"], sigma=0.05, samples=4,
                              how="synthetic"),
             profile_schema.FitTerm(term="collective.intra_efficiency", value=0.5, sigma=0.1, samples=4,
                              how="synthetic")],
        measurements={"padding": "x" * padding_bytes}, notes=["synthetic test profile"])


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_save_get_list_newest_version_wins():
    first = profiles.save_profile(synthetic())
    second = profiles.save_profile(synthetic().model_copy(update={"quick": False}))
    assert second > first
    assert profiles.get_profile("h200-test").quick is False
    assert [s.version for s in profiles.list_profiles()] == [second]
    assert [s.version for s in profiles.list_profiles(all_versions=True)] == [second, first]


def test_reading_an_absent_store_creates_nothing(home):
    assert profiles.list_profiles() == []
    assert profiles.priors_for(None, "H200") == (default_priors(), None)
    assert not home.exists()


def test_priors_for_applies_exactly_the_overrides():
    profiles.save_profile(synthetic())
    priors, note = profiles.priors_for("h200-test", "H200", 8, 1)
    base = default_priors()
    assert priors.gemm_efficiency["hopper"](1024) == 0.30
    assert priors.collective.intra_efficiency == 0.5
    # Everything not overridden is the shipped value.
    assert priors.gemm_efficiency["ampere"] == base.gemm_efficiency["ampere"]
    assert priors.collective.inter_efficiency == base.collective.inter_efficiency
    assert priors.overhead == base.overhead
    assert "h200-test" in note and "NVIDIA H200" in note


def test_automatic_match_prefers_the_same_node_shape_then_the_newest():
    profiles.save_profile(synthetic("eight", per_node=8))
    profiles.save_profile(synthetic("four", per_node=4))
    profiles.save_profile(synthetic("other-gpu", gpu="A100-80GB"))
    assert "'eight'" in profiles.priors_for(None, "H200", 8, 1)[1]
    assert "'four'" in profiles.priors_for(None, "H200", 4, 1)[1]
    note = profiles.priors_for(None, "H200", 2, 1)[1]  # no 2-GPU profile: the newest H200 one
    assert "'four'" in note and "collective terms may differ" in note
    assert profiles.priors_for(None, "B200") == (default_priors(), None)
    assert profiles.priors_for("none", "H200") == (default_priors(), None)


def test_explicit_profile_of_another_gpu_or_unknown_name_is_invalid_input():
    profiles.save_profile(synthetic())
    with pytest.raises(InvalidInput, match="measured on H200, not A100-80GB") as exc:
        profiles.priors_for("h200-test", "A100-80GB")
    assert exc.value.field == "profile"
    with pytest.raises(InvalidInput, match="no valid profile named 'nope'") as exc:
        profiles.priors_for("nope", "H200")
    assert "h200-test" in exc.value.allowed


def test_export_import_round_trip_and_rename(tmp_path):
    profiles.save_profile(synthetic())
    path = tmp_path / "p.json"
    profile_store.write_atomic(path, profiles.export_profile("h200-test"))
    imported, _ = profiles.import_profile(path, rename="copy")
    unsealed = {"name", "checksum"}
    assert imported.model_dump(exclude=unsealed) == synthetic().model_dump(exclude=unsealed)
    assert {s.name for s in profiles.list_profiles()} == {"h200-test", "copy"}


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(schema_version=99), "schema_version"),
    (lambda d: d["overrides"].update(collective={"intra_efficiency": 5.0}), "overrides"),
    (lambda d: d["overrides"].update(no_such_table={}), "overrides"),
    (lambda d: d.update(name="../evil"), "name"),
])
def test_invalid_profiles_are_rejected_naming_the_field(edit, field):
    data = json.loads(synthetic().model_dump_json())
    edit(data)
    with pytest.raises(InvalidInput) as exc:
        profiles.parse_profile(data)
    assert exc.value.field.startswith(field)


def test_api_calls_store_list_and_delete():
    summary = profiles.create_calibration(profile_schema.seal(synthetic()))
    assert summary.name == "h200-test" and summary.catalog_gpu == "H200"
    assert summary.missing_terms  # two terms are far from a complete profile
    assert [s.name for s in profiles.listing(catalog_gpu="H200").items] == ["h200-test"]
    assert profiles.listing(catalog_gpu="A100-80GB").items == []
    assert profiles.delete_calibration("h200-test") == 1
    assert profiles.delete_calibration("h200-test") == 0
    assert profiles.list_profiles() == []


def test_a_tampered_row_is_skipped_and_reported_a_newer_store_schema_refused():
    good = profiles.save_profile(synthetic("good"))
    bad = profiles.save_profile(synthetic())
    con = sqlite3.connect(profile_store.store_path(), isolation_level=None)
    con.execute("UPDATE profiles SET body = replace(body, '0.5', '0.6') WHERE version = ?", (bad,))
    with pytest.raises(InvalidInput, match="no valid profile named 'h200-test'"):
        profiles.get_profile("h200-test")
    found = profiles.listing()
    assert [s.version for s in found.items] == [good]
    assert [s.version for s in found.skipped] == [bad] and "checksum" in found.skipped[0].reason
    priors, note = profiles.priors_for(None, "H200", 8, 1)  # 'good' is used, the bad row is named
    assert "'good'" in note and f"version {bad}" in note
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(AdvisorError, match="newer advisor"):
        profiles.list_profiles()


# -- reliability: separate processes, as concurrent calibrations would be ------------------------

WRITER = textwrap.dedent("""
    import sys
    from advisor.profiles import store as profile_store
    from advisor.profiles import use as profiles
    from advisor.profiles import schema as profile_schema
    template = profiles.parse_profile(open(sys.argv[1]).read())
    for i in range(int(sys.argv[3])):
        version = profiles.save_profile(template.model_copy(update={"name": f"{sys.argv[2]}-{i}"}))
        print(f"{sys.argv[2]}-{i}", flush=True)
""")


def _template(tmp_path: Path, padding_bytes: int) -> Path:
    path = tmp_path / "template.json"
    path.write_text(profile_schema.seal(synthetic(padding_bytes=padding_bytes)).model_dump_json())
    return path


def _check_store(expected_names: set[str]) -> None:
    """Readable, consistent, every listed profile loads whole, and `expected_names` all there."""
    con = sqlite3.connect(profile_store.store_path())
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    stored = profiles.list_profiles(all_versions=True)  # loads and validates every body
    assert expected_names <= {s.name for s in stored}


def test_two_concurrent_writers_lose_nothing(tmp_path):
    template = _template(tmp_path, 200_000)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(template), tag, "20"],
                              stdout=subprocess.PIPE, text=True) for tag in ("a", "b")]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    names = {line for out in outs for line in out.split()}
    assert len(names) == 40
    _check_store(names)
    assert len(profiles.list_profiles(all_versions=True)) == 40


HALF_WRITER = textwrap.dedent("""
    import sys, time
    from advisor.profiles import store as profile_store
    from advisor.profiles import use as profiles
    from advisor.profiles import schema as profile_schema
    template = profiles.parse_profile(open(sys.argv[1]).read())
    profiles.save_profile(template.model_copy(update={"name": "committed"}))
    body = template.model_copy(update={"name": "half"}).model_dump_json()
    from advisor.profiles import store as profile_store
    with profile_store._transaction(write=True) as con:  # insert()'s transaction, held open
        con.execute("INSERT INTO profiles (name, fingerprint_key, catalog_gpu, created_at, body, "
                    "body_sha256) VALUES ('half', 'k', 'H200', 'now', ?, 'x')", (body,))
        print("inserted", flush=True)
        time.sleep(60)
""")


def test_writer_killed_mid_transaction_leaves_no_half_profile(tmp_path):
    template = _template(tmp_path, 8_000_000)  # larger than SQLite's page cache: pages hit the WAL
    proc = subprocess.Popen([sys.executable, "-c", HALF_WRITER, str(template)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "inserted"
    assert (profile_store.store_path().parent / "profiles.db-wal").stat().st_size > 1_000_000
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _check_store({"committed"})
    assert [s.name for s in profiles.list_profiles(all_versions=True)] == ["committed"]
    profiles.save_profile(synthetic("after"))  # the killed writer's lock is gone
    assert {s.name for s in profiles.list_profiles()} == {"committed", "after"}


@pytest.mark.parametrize("delay_s", [0.3, 0.6, 0.9])
def test_writer_killed_at_a_random_moment_loses_no_committed_profile(tmp_path, delay_s):
    template = _template(tmp_path, 3_000_000)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(template), "k", "1000"],
                            stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()  # the first save is committed: the writer is mid-loop from here on
    time.sleep(delay_s)
    os.kill(proc.pid, signal.SIGKILL)
    printed = {"k-0", *proc.stdout.read().split()}
    proc.wait(timeout=30)
    _check_store(printed)
    stored = {s.name for s in profiles.list_profiles(all_versions=True)}
    assert len(stored - printed) <= 1  # at most the one committed as the kill came


SHIPPED = sorted((Path(__file__).resolve().parents[1] / "calibration" / "profiles").glob("*.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_profiles_load_complete_and_are_never_fake_gpu_numbers(path):
    profile = profiles.parse_profile(path.read_text())
    assert profile_schema.missing_terms(profile) == []
    if profile.fingerprint.device == "cpu":
        assert profile.catalog_gpu is None  # a CPU profile can never be matched to a GPU
    else:  # a GPU profile carries the raw measurements it was fitted from
        assert profile.measurements["gemm"] and profile.measurements["runs"]["runs"]
