"""The web form in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright;
`.ci/install-browser.sh` installs it, `playwright install` is never run) against a real
`advisor serve`. Screenshots go to artifacts/ (gitignored). Skips when chromium is missing."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_api_server import serve

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium "
                                "(bash .ci/install-browser.sh installs it)")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve() as url:
        yield url


@pytest.fixture(scope="module")
def page(base):
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
        context.set_default_timeout(20_000)
        yield context.new_page()
        context.close()
        browser.close()


def fill_and_submit(page, base: str) -> None:
    page.goto(base + "/")
    page.get_by_label("parameter count").check()
    page.get_by_label("Parameters").fill("7B")
    page.get_by_label("GPU type").select_option("H100-80GB")
    page.get_by_label("GPUs per node").fill("8")
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("Sequence length").fill("8192")
    page.get_by_label("Global batch").fill("4M")
    page.get_by_label("Tokens to train").fill("300B")
    page.get_by_label("Precision").select_option("bf16")
    with page.expect_navigation():
        page.get_by_label("Tokens to train").press("Enter")  # submit from the keyboard


def test_fill_submit_see_table_and_charts(page, base):
    fill_and_submit(page, base)
    assert page.locator("#result-title").inner_text().startswith("Recommendation")
    assert page.locator("#ranking tbody tr").count() == 11
    memory = page.locator("svg#memory-chart")
    assert memory.is_visible()
    assert memory.locator("rect").count() >= 11
    assert memory.locator("line.capacity").count() == 1
    assert page.locator("svg#throughput-chart").is_visible()
    assert page.get_by_label("Parameters").input_value() == "7B"  # the form keeps the input
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-result.png"), full_page=True)


def test_download_the_config_zip(page, base):
    fill_and_submit(page, base)
    with page.expect_download() as info:
        page.locator("#download").click()
    download = info.value
    assert download.suggested_filename.endswith(".zip")
    data = Path(download.path()).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
        assert names
        for name in names:
            assert archive.read(name).strip(), f"{name} is empty"


def test_bad_input_shows_the_message_next_to_the_field(page, base):
    page.goto(base + "/")
    page.get_by_label("Parameters").fill("abc")
    page.get_by_label("Sequence length").fill("2000000")
    with page.expect_navigation():
        page.locator("#submit").click()
    params = page.get_by_label("Parameters")
    assert params.get_attribute("aria-invalid") == "true"
    error = page.locator("#err-params")
    assert error.is_visible() and "not a number" in error.inner_text()
    assert "1048576" in page.locator("#err-seq_len").inner_text()
    assert page.locator("#result-title").count() == 0
    page.screenshot(path=str(ARTIFACTS / "web-error.png"), full_page=True)


def test_keyboard_reaches_every_field_and_the_button(page, base):
    page.goto(base + "/")
    page.locator("body").focus()
    seen = []
    for _ in range(40):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id"))
        if seen[-1] == "submit":
            break
    for name in ("params", "model", "hf_config", "gpu", "gpus_per_node", "nodes",
                 "inter_node_gbps", "seq_len", "global_batch_tokens", "tokens", "precision", "submit"):
        assert name in seen, f"Tab never reached {name}: {seen}"
