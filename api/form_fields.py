"""The web form's fields, derived from the request model as the CLI's flags are
(advisor/cli/flags.py): one form field per field of `ConfigsRequest` (the job, as for
/v1/recommend, plus what the config files need), in fieldsets by the field's `x-group`, its
hint from its docstring, its widget from its type. A field added to the request model appears
in the form, folded under its group's "More ... options", with no edit here; LABELS and BASIC
only make the common fields read better and show them unfolded.

Widgets: `text` (numbers and count strings as typed, like the CLI), `select` (a Literal, an
optional bool as auto/yes/no, the presets, the GPUs), `check` (a bool: a hidden "false" before
the box, so an unticked box posts false), `checks` (a list of Literals, comma-joined like the
CLI's comma-list), `json` (a config.json: pasted or uploaded). `gpus` is the one field shown as
several: GPU type x GPUs per node x nodes.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

from annotated_types import MaxLen
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from advisor.cli.catalog import gpu_rows, model_rows
from advisor.cli.flags import flag_name
from api.schemas import ConfigsRequest

Widget = Literal["text", "select", "check", "checks", "json"]
MODEL_GROUP = "model (one of)"
DEFAULT_GROUP = "config files"  # fields without an x-group: ConfigsRequest's own
GROUP_TITLES = {MODEL_GROUP: "Model", "strategy": "Strategies"}
# (form value, radio text, request fields); the shape source takes the model group's other fields.
SOURCES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("params", "parameter count", ("params",)), ("preset", "preset", ("model",)),
    ("hf_config", "config.json", ("hf_config",)), ("shape", "layer shape", ()))
LABELS = {
    "params": "Parameters", "model": "Preset", "hf_config": "config.json", "hidden": "Hidden size",
    "heads": "Attention heads", "kv_heads": "KV heads", "ffn": "FFN size", "vocab": "Vocabulary",
    "gated_mlp": "Gated MLP (SwiGLU)", "gpu": "GPU type", "gpus_per_node": "GPUs per node",
    "nodes": "Nodes", "inter_node_gbps": "Network", "cpu_ram_gib": "Host RAM",
    "nvme_gbps": "NVMe bandwidth", "nvme_tib": "NVMe capacity", "profile": "Calibration profile",
    "seq_len": "Sequence length", "compile": "torch.compile", "micro_batch": "Micro-batch",
    "grad_accum": "Gradient accumulation", "global_batch_tokens": "Global batch",
    "tokens": "Tokens to train", "act_ckpt": "Activation checkpointing",
    "sync_each_micro_batch": "Sync each micro-batch", "fsdp_version": "FSDP version",
    "code_changes": "Code changes allowed", "strategy": "Config files for", "nvme_path": "NVMe path",
}
# Shown unfolded, in this order; every other field sits in its group's <details>.
BASIC = ("gpu", "gpus_per_node", "nodes", "inter_node_gbps", "seq_len", "global_batch_tokens",
         "tokens", "precision")
FORM_DEFAULTS = {"model_source": "params", "params": "13B", "model": "llama-3-8b",
                 "gpu": "A100-80GB", "nodes": "1"}
EMPTY_CHOICE = {"strategy": "the recommended plan"}  # the blank option of an optional select
HINT_CHARS = 140  # a longer docstring shows its first clause, the rest under "more"


@dataclass(frozen=True, slots=True)
class FormField:
    name: str
    label: str
    hint: str
    """The docstring, or its first clause when long."""
    doc: str
    """The whole docstring when the hint is shorter, else ""."""
    flag: str
    """The CLI flag that sets the same field ("" for the form's own fields)."""
    widget: Widget
    group: str
    choices: tuple[tuple[str, str], ...] = ()
    """(value, text) of a select's options or a checks group's boxes."""
    default: str = ""
    source: str | None = None
    """The model source this field belongs to (model group only)."""
    inputmode: str | None = None
    maxlength: int | None = None
    ints: bool = False
    """A Literal of ints (fsdp_version): the value is sent as a number."""


@dataclass(frozen=True, slots=True)
class Group:
    key: str
    title: str
    basic: tuple[FormField, ...]
    advanced: tuple[FormField, ...]


def _extra(info: FieldInfo) -> dict[str, Any]:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


def _args(tp: Any) -> list[Any]:
    """`tp` and every type inside it (Optional, Annotated, list)."""
    out, stack = [], [tp]
    while stack:
        t = stack.pop()
        out.append(t)
        stack.extend(typing.get_args(t) if typing.get_origin(t) is not typing.Literal else ())
    return out


def _literal(info: FieldInfo) -> tuple[Any, ...]:
    return next((typing.get_args(t) for t in _args(info.annotation)
                 if typing.get_origin(t) is typing.Literal), ())


def _parsed_text(info: FieldInfo) -> bool:
    """Takes text the model parses (a count such as 13B, a length such as 4k)."""
    metadata = [*info.metadata, *(m for t in _args(info.annotation) for m in getattr(t, "__metadata__", ()))]
    return any(isinstance(m, BeforeValidator) for m in metadata)


def _hint(doc: str) -> tuple[str, str]:
    """(hint, doc): the docstring in one line, and when long its first clause as the hint."""
    text = " ".join(doc.replace("`", "").split())
    if len(text) <= HINT_CHARS:
        return text, ""
    cuts = [m.start() for m in re.finditer(r"; | \(|(?<!e\.g)(?<!i\.e)\. ", text) if m.start() >= 25]
    return (text[:cuts[0]] if cuts else text[:HINT_CHARS].rsplit(" ", 1)[0] + " …"), text


def _default_text(info: FieldInfo, choices: tuple[tuple[str, str], ...], widget: Widget) -> str:
    default = info.default
    if widget == "checks":
        return ",".join(default or (v for v, _ in choices))
    if default is None or default is PydanticUndefined:
        return ""
    return str(default).lower() if isinstance(default, bool) else str(default)


@cache
def _presets() -> tuple[tuple[str, str], ...]:
    return tuple((m["name"], f"{m['name']} ({m['params'] / 1e9:.1f}B)") for m in model_rows())


@cache
def gpu_nodes() -> dict[str, int]:
    """GPU name -> GPUs in its typical server (the default of GPUs per node)."""
    return {g["name"]: g["node"]["gpus_per_node"] for g in gpu_rows()}


def _field(name: str, info: FieldInfo, group: str) -> FormField:
    literal, tps = _literal(info), _args(info.annotation)
    widget: Widget = "text"
    choices: tuple[tuple[str, str], ...] = ()
    optional = not info.is_required() and info.default is None
    if typing.get_origin(info.annotation) is list or any(typing.get_origin(t) is list for t in tps):
        widget, choices = "checks", tuple((str(v), str(v)) for v in literal)
    elif literal:
        widget = "select"
        blank = (("", EMPTY_CHOICE.get(name, "auto")),) if optional else ()
        choices = blank + tuple((str(v), str(v)) for v in literal)
    elif info.annotation is bool:
        widget = "check"
    elif bool in tps:
        widget, choices = "select", (("", "auto"), ("true", "yes"), ("false", "no"))
    elif dict in tps or any(typing.get_origin(t) is dict for t in tps):
        widget = "json"
    elif name == "model":
        widget, choices = "select", _presets()
    hint, doc = _hint(info.description or "")
    numeric = widget == "text" and not _parsed_text(info) and (int in tps or float in tps)
    return FormField(
        name=name, label=LABELS.get(name, name.replace("_", " ").capitalize()), hint=hint, doc=doc,
        flag=flag_name(name), widget=widget, group=group, choices=choices,
        default=FORM_DEFAULTS.get(name, _default_text(info, choices, widget)),
        inputmode=("decimal" if float in tps else "numeric") if numeric else None,
        maxlength=next((m.max_length for m in info.metadata if isinstance(m, MaxLen)), None),
        ints=bool(literal) and all(isinstance(v, int) for v in literal))


def _gpus_fields(info: FieldInfo, group: str) -> list[FormField]:
    """`gpus` as the form shows it: GPU type and nodes (GPUs per node is its own field)."""
    gpus = tuple((name, f"{name} ({g['memory_in_GiB']:g} GiB)")
                 for name, g in ((g["name"], g) for g in gpu_rows()))
    return [FormField(name="gpu", label="GPU type", hint="", doc="", flag="", widget="select",
                      group=group, choices=gpus, default=FORM_DEFAULTS["gpu"]),
            FormField(name="nodes", label="Nodes", hint="servers of GPUs per node each", doc="",
                      flag="", widget="text", group=group, default=FORM_DEFAULTS["nodes"],
                      inputmode="numeric")]


def _source_of(name: str) -> str:
    return next((key for key, _, names in SOURCES if name in names), SOURCES[-1][0])


def build_fields(model: type[BaseModel] = ConfigsRequest) -> tuple[FormField, ...]:
    """Every field of the form, in the request model's order (`gpus` expanded)."""
    out: list[FormField] = []
    for name, info in model.model_fields.items():
        group = str(_extra(info).get("x-group", DEFAULT_GROUP))
        if name == "gpus":
            out += _gpus_fields(info, group)
            continue
        f = _field(name, info, group)
        out.append(replace(f, source=_source_of(name)) if group == MODEL_GROUP else f)
    return tuple(out)


def build_groups(fields: tuple[FormField, ...]) -> tuple[Group, ...]:
    """Fieldsets in the order their first field appears; the model group is all basic (its
    sources switch), elsewhere BASIC fields come first, in BASIC's order, the rest folded."""
    names = list(dict.fromkeys(f.group for f in fields))
    groups = []
    for name in names:
        members = [f for f in fields if f.group == name]
        basic = members if name == MODEL_GROUP else sorted(
            (f for f in members if f.name in BASIC), key=lambda f: BASIC.index(f.name))
        groups.append(Group(key=name.split()[0], title=GROUP_TITLES.get(name, name.capitalize()),
                            basic=tuple(basic), advanced=tuple(f for f in members if f not in basic)))
    return tuple(groups)


@cache
def fields() -> tuple[FormField, ...]:
    """The form's fields (built on first use: the GPU and preset lists are read from data files)."""
    return build_fields()


@cache
def by_name() -> dict[str, FormField]:
    return {f.name: f for f in fields()}


@cache
def groups() -> tuple[Group, ...]:
    return build_groups(fields())
