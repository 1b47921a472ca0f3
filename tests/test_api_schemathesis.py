"""Property-based fuzzing of the whole OpenAPI schema with Schemathesis (in process, ASGI).

Every operation gets a bounded number of generated requests, derandomized so CI is
reproducible: no 5xx, and every response matches its documented status, content type and
schema. `positive_data_acceptance` is left out: the schema cannot say "exactly one of params,
model, hf_config or the shape" or "heads divides hidden", so schema-valid bodies may rightly get
a 422 (which the other checks still hold to the error schema).
"""

from __future__ import annotations

import os
import subprocess
import sys

import schemathesis
from hypothesis import HealthCheck, settings

from api.app import create_app
from api.settings import Settings

MAX_EXAMPLES = 60  # per operation; the whole file runs in ~10 s on 2 cores

TOKEN = "schemathesis-" + "0" * 20
AUTH = {"Authorization": f"Bearer {TOKEN}"}  # so the writes (profiles) are fuzzed past the auth check
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(Settings(api_token=TOKEN)))


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_schema(case):
    case.call_and_validate(headers=AUTH, excluded_checks=[schemathesis.checks.positive_data_acceptance])


def test_schemathesis_cli_against_the_live_server(tmp_path):
    """The same contract over real HTTP: Schemathesis' CLI (examples, coverage and fuzzing
    phases, deterministic) against `advisor serve` on loopback."""
    from tests.test_api_server import serve

    with serve(env={"ADVISOR_API_TOKEN": TOKEN}) as base:
        proc = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", f"{base}/openapi.json",
             "--max-examples", "30", "--generation-deterministic", "--workers", "1", "--no-color",
             "--exclude-checks", "positive_data_acceptance", "--header", f"Authorization: Bearer {TOKEN}"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,  # its cache folder goes there
            env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout
