"""The wheel carries everything a non-editable install needs: the packages pyproject.toml lists
by hand match the tree, and an installed wheel finds its data, static files and templates
(shipped as the package `advisor_templates`) without the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_python_package_of_the_tree():
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    tree = {".".join(p.parent.relative_to(REPO).parts) for top in ("advisor", "api", "calibration")
            for p in (REPO / top).rglob("__init__.py")}
    assert listed - {"advisor_templates"} == tree
    assert config["package-dir"] == {"advisor_templates": "templates"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a clean copy of the sources (no build/ left by an earlier build)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("advisor", "api", "calibration", "templates"):
        shutil.copytree(REPO / name, source / name, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out)], check=True, capture_output=True, timeout=300)
    return next(out.glob("advisor-*.whl"))


def test_the_wheel_ships_templates_static_files_data_and_profiles(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in (*(REPO / "templates").rglob("*.j2"), *(REPO / "templates").rglob("*.html")):
        assert "advisor_templates/" + path.relative_to(REPO / "templates").as_posix() in names
    assert "api/static/style.css" in names
    assert "calibration/profiles/example-cpu-gloo.json" in names
    assert {n for n in names if n.startswith("advisor/data/gpus/")}


def test_an_installed_wheel_renders_a_plan_without_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    script = (f"import sys; sys.path.insert(0, {str(target)!r})\n"
              "import advisor, advisor.emitters.files as e\n"
              "from advisor.emitters.choices import EmitOptions\n"
              f"assert advisor.__file__.startswith({str(target)!r}), advisor.__file__\n"
              "print(e.templates_dir())\n"
              "e.emit_strategy({'params': 1e9, 'gpus': '8xA100'}, 'fsdp', "
              f"__import__('pathlib').Path({str(tmp_path / 'plan')!r}), EmitOptions())\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(target / "advisor_templates")
    assert (tmp_path / "plan" / "accelerate_config.yaml").is_file()
    assert (tmp_path / "plan" / "PLAN.md").read_text().startswith("<!-- written by advisor")
