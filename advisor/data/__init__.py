"""Presets and priors as data files; `load_presets` reads a folder of them."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import TypeVar

from pydantic import BaseModel

Preset = TypeVar("Preset", bound=BaseModel)


def load_presets(folder: str, cls: type[Preset]) -> dict[str, Preset]:
    """Every `advisor/data/<folder>/*.toml` validated as `cls`, by its `name`, which must equal
    the file name (llm-analysis's convention: a preset's file name is its id)."""
    presets = {}
    for entry in resources.files("advisor.data").joinpath(folder).iterdir():
        if entry.name.endswith(".toml"):
            preset = cls.model_validate(tomllib.loads(entry.read_text()))
            name = getattr(preset, "name", None)
            if name != entry.name.removesuffix(".toml"):
                raise ValueError(f"{entry.name}: name {name!r} must equal the file name")
            presets[name] = preset
    return presets
