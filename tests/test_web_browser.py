"""The web form in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright;
`.ci/install-browser.sh` installs it, `playwright install` is never run) against a real
`advisor serve`, at a desktop width (1280 px) and a phone's (390 px). Screenshots go to
artifacts/ (gitignored). Skips when chromium is missing. The field-by-field checks run in
process (tests/test_web_form.py); here is what only a browser shows: what is visible, what
scrolls, how big the text is, what the browser posts and downloads."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.form_fields import MODEL_GROUP, fields
from tests.test_api_server import serve

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
HF_CONFIG = Path(__file__).parent / "data" / "hf_configs" / "qwen2.5-7b.json"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}

# The texts of an SVG chart whose box meets a capacity line's.
ON_THE_LINE = """svg => {
    const boxes = sel => [...svg.querySelectorAll(sel)].map(e => [e.getBoundingClientRect(), e]);
    const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const lines = boxes('line.capacity');
    return boxes('text').filter(([t]) => lines.some(([l]) => meet(t, l))).map(([, e]) => e.textContent);
}"""
# Label, and the vertical centres of the box and of its label, of each shown choice.
CENTRES = """spans => spans.filter(s => s.offsetParent).map(s => {
    const middle = e => { const r = e.getBoundingClientRect(); return (r.top + r.bottom) / 2; };
    const label = s.querySelector('label');
    return [label.textContent, middle(s.querySelector('input')), middle(label)];
})"""

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium "
                                "(bash .ci/install-browser.sh installs it)")

# Every field, as typed at each width; between the two every field is set at least once
# (grad_accum and global_batch_tokens exclude each other). Booleans: ticked or not.
COMMON = {"params": "7B", "model": "qwen2.5-7b", "layers": "32", "hidden": "4096", "heads": "32",
          "kv_heads": "8", "ffn": "14336", "vocab": "128256", "gated_mlp": True, "tied_embeddings": False,
          "gpu": "H100-80GB", "gpus_per_node": "8", "nodes": "2", "inter_node_gbps": "400",
          "cpu_ram_gib": "2048", "nvme_gbps": "200", "nvme_tib": "30", "profile": "none",
          "seq_len": "4096", "tokens": "300B", "precision": "bf16", "master_weights": True,
          "flash_attention": True, "fsdp_version": "2", "code_changes": True,
          "strategies": ["ddp", "hsdp"],  # unticked
          "strategy": "", "nvme_path": "/local_nvme"}
JOBS = {
    "desktop": {**COMMON, "model_source": "shape", "optimizer": "adamw", "compile": True, "fused_loss": True,
                "micro_batch": "2", "grad_accum": "4", "global_batch_tokens": "", "act_ckpt": "selective",
                "sync_each_micro_batch": "false"},
    "phone": {**COMMON, "model_source": "hf_config", "optimizer": "adamw", "compile": False,
              "fused_loss": False, "micro_batch": "1", "grad_accum": "", "global_batch_tokens": "2M",
              "act_ckpt": "full", "sync_each_micro_batch": "true"},
}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        yield browser
        browser.close()


def _context(browser, kind: str):
    phone = kind == "phone"
    context = browser.new_context(viewport=VIEWPORTS[kind], is_mobile=phone, has_touch=phone,
                                  accept_downloads=True)
    context.set_default_timeout(20_000)
    return context


@pytest.fixture(params=list(VIEWPORTS))
def page(browser, request):
    context = _context(browser, request.param)
    page = context.new_page()
    page.kind = request.param  # type: ignore[attr-defined]
    yield page
    context.close()


@pytest.fixture
def desktop(browser):
    context = _context(browser, "desktop")
    yield context.new_page()
    context.close()


def no_sideways_scroll(page) -> None:
    """Nothing wider than the screen. A phone browser lays out a page too wide for it in a wider
    window and zooms out, so both widths are held to the device's."""
    device = page.viewport_size["width"]
    width, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert (width, inner) == (device, device), f"the page is {width} px wide, the window {inner} px"


def open_folds(page) -> None:
    for summary in page.locator("details.more > summary").all():
        if summary.evaluate("s => !s.parentElement.open"):
            summary.click()


def choose_source(page, source: str) -> None:
    page.locator(f"#source-{source}").check()


def fill(page, job: dict) -> None:
    """Type every field of `job` the way a user does: each model source's fields under its
    source (the config.json uploaded), then the chosen source again."""
    open_folds(page)
    for f in fields():
        value = job.get(f.name)
        if f.source is not None:
            choose_source(page, f.source)
        if f.widget == "json":
            page.locator(f"#{f.name}_file").set_input_files(str(HF_CONFIG))
        elif value is None:
            assert f.group != MODEL_GROUP, f"the test has no value for {f.name}"
        elif f.widget == "check":
            page.locator(f"#{f.name}").set_checked(value)
        elif f.widget == "checks":
            for choice, _ in f.choices:
                page.locator(f"#{f.name}-{choice}").set_checked(choice not in value)
        elif f.widget == "select":
            page.locator(f"#{f.name}").select_option(value)
        else:
            page.locator(f"#{f.name}").fill(value)
    choose_source(page, job["model_source"])


def check_charts(page) -> None:
    """Each chart fills its box without scaling: 11 px text or more, every label inside its
    chart and clear of the capacity line."""
    charts = page.locator("svg.chart")
    assert charts.count() == 4
    for i in range(charts.count()):
        report = charts.nth(i).evaluate("""svg => {
            const box = svg.getBoundingClientRect();
            return [...svg.querySelectorAll('text')].map(t => {
                const r = t.getBoundingClientRect();
                return [parseFloat(getComputedStyle(t).fontSize), r.left - box.left, box.right - r.right,
                        t.textContent];
            });
        }""")
        for size, left, right, text in report:
            assert size >= 11, (text, size)
            assert left >= -0.5 and right >= -0.5, f"{text!r} sticks out of its chart"
        hits = charts.nth(i).evaluate(ON_THE_LINE)
        assert hits == [], f"labels on the capacity line: {hits}"


def check_choices(page) -> None:
    """Each radio button and check box sits on the line of its label."""
    rows = page.locator(".choice").evaluate_all(CENTRES)
    assert rows and all(abs(box - label) < 6 for _, box, label in rows), rows


def test_fill_every_field_submit_and_download(page, base):
    job = JOBS[page.kind]
    page.goto(base + "/")
    fill(page, job)
    check_choices(page)
    if page.kind == "phone":
        no_sideways_scroll(page)  # every fold open, every field filled
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-form-{page.kind}.png"), full_page=True)
    with page.expect_navigation():
        page.locator("#tokens").press("Enter")  # submit from the keyboard
    assert page.url.endswith("/#results")  # the page opens at the results, not the form's top
    assert page.evaluate("window.scrollY") > 0
    assert page.locator("#result-title").inner_text().startswith("Recommendation")
    assert page.locator("#ranking tbody tr").count() == 9  # ddp and hsdp unticked
    model_line = page.locator(".context").inner_text()
    assert ("custom" in model_line) if page.kind == "desktop" else ("(qwen2)" in model_line)
    chosen = page.locator("#ranking tr.chosen td.plan").inner_text()
    assert chosen.startswith("2 × 4, ckpt selective" if page.kind == "desktop" else "1 × ")
    for name in ("params", "nvme_tib", "micro_batch", "tokens"):  # the form keeps what was typed
        assert page.locator(f"#{name}").input_value() == job[name]
    assert page.locator("#compile").is_checked() == job["compile"]
    assert not page.locator("#strategies-ddp").is_checked()
    check_charts(page)
    if page.kind == "phone":
        no_sideways_scroll(page)
        box = page.locator(".table-scroll")
        assert box.evaluate("b => b.scrollWidth > b.clientWidth")  # the table scrolls in its box
    page.screenshot(path=str(ARTIFACTS / f"web-result-{page.kind}.png"), full_page=True)

    with page.expect_download() as info:
        page.locator("#download").click()
    assert info.value.suggested_filename == "advisor-plan.zip"
    with zipfile.ZipFile(io.BytesIO(Path(info.value.path()).read_bytes())) as archive:
        for name in archive.namelist():
            assert archive.read(name).strip(), f"{name} is empty"
        args = json.loads(archive.read("training_args.json"))
        model = json.loads(archive.read("model_config.json"))
    micro, accum = (2, 4) if page.kind == "desktop" else (1, None)
    assert args["per_device_train_batch_size"] == micro
    if accum:
        assert args["gradient_accumulation_steps"] == accum
    assert model["hidden_size"] == (4096 if page.kind == "desktop" else 3584)  # shape / the upload


def test_the_model_source_shows_one_input_at_a_time(desktop, base):
    page = desktop
    page.goto(base + "/")
    sources = {"params": ["#params"], "preset": ["#model"], "hf_config": ["#hf_config", "#hf_config_file"],
               "shape": ["#layers", "#hidden", "#tied_embeddings"]}
    for source in sources:
        choose_source(page, source)
        for other, selectors in sources.items():
            for selector in selectors:
                assert page.locator(selector).is_visible() == (other == source), (source, selector)
    choose_source(page, "params")
    page.locator("#params").fill("13B")
    choose_source(page, "preset")  # the 13B is out of sight, and not used
    page.locator("#model").select_option("llama-3-8b")
    with page.expect_navigation():
        page.locator("#submit").click()
    assert page.locator(".context").inner_text().startswith("llama-3-8b")


def test_an_nvme_plan_asks_for_the_path_then_downloads(page, base):
    page.goto(base + "/")
    page.locator("#params").fill("70B")
    page.locator("#more-strategy > summary").click()
    for f in fields():
        if f.name == "strategies":
            for choice, _ in f.choices:
                page.locator(f"#strategies-{choice}").set_checked(choice == "zero3-nvme")
    with page.expect_navigation():
        page.locator("#submit").click()
    path = page.locator("#bundle-nvme_path")
    assert path.is_visible() and "NVMe" in page.get_by_text("NVMe path for the swap files").inner_text()
    with page.expect_navigation():
        page.locator("#download").click()  # no path yet: the page says which field to fill
    error = page.locator("#err-bundle-nvme_path")
    assert error.is_visible() and "NVMe" in error.inner_text()
    assert page.locator("#bundle-nvme_path").get_attribute("aria-invalid") == "true"
    page.locator("#bundle-nvme_path").fill("/local_nvme")
    with page.expect_download() as info:
        page.locator("#download").click()
    with zipfile.ZipFile(io.BytesIO(Path(info.value.path()).read_bytes())) as archive:
        ds = json.loads(archive.read("ds_config.json"))
    assert ds["zero_optimization"]["offload_optimizer"]["nvme_path"] == "/local_nvme"
    if page.kind == "phone":
        no_sideways_scroll(page)


def test_a_body_over_the_limit_is_a_page(desktop, base):
    page = desktop
    page.goto(base + "/")
    choose_source(page, "hf_config")
    page.locator("#hf_config_file").set_input_files(files=[{
        "name": "huge.json", "mimeType": "application/json", "buffer": b'{"a": "' + b"x" * 300_000 + b'"}'}])
    with page.expect_navigation():
        page.locator("#submit").click()
    assert page.locator("#problem-title").inner_text().startswith("Too much data")
    assert "256 KiB" in page.locator("#problem").inner_text()
    page.locator("#back").click()
    assert page.locator("#form-title").is_visible()


def test_bad_input_shows_the_message_next_to_the_field(desktop, base):
    page = desktop
    page.goto(base + "/")
    page.locator("#params").fill("abc")
    page.locator("#seq_len").fill("2000000")
    with page.expect_navigation():
        page.locator("#submit").click()
    params = page.locator("#params")
    assert params.get_attribute("aria-invalid") == "true"
    error = page.locator("#err-params")
    assert error.is_visible() and "not a number" in error.inner_text()
    assert "1048576" in page.locator("#err-seq_len").inner_text()
    assert page.locator("#result-title").count() == 0
    page.screenshot(path=str(ARTIFACTS / "web-error.png"), full_page=True)


def test_keyboard_reaches_every_shown_field_and_the_button(desktop, base):
    page = desktop
    page.goto(base + "/")
    page.locator("body").focus()
    seen = []
    for _ in range(60):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
        if seen[-1] == "submit":
            break
    for name in ("source-params", "params", "gpu", "gpus_per_node", "nodes", "inter_node_gbps", "seq_len",
                 "global_batch_tokens", "tokens", "precision", "submit"):
        assert name in seen, f"Tab never reached {name}: {seen}"
    assert seen.count("SUMMARY") >= 4  # each fold opens from the keyboard
