"""The web form: its fields, their defaults, and the mapping to a RecommendRequest.

The form posts strings; they go to the same request model as the REST API, and every error
comes back keyed by the form field it belongs to, so the page shows it next to that field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from pydantic import ValidationError

from advisor.core.errors import InvalidInput
from advisor.core.hardware import MAX_GPUS
from api.errors import field_errors
from api.schemas import RecommendRequest

FIELDS = ("model_source", "params", "model", "hf_config", "gpu", "gpus_per_node", "nodes",
          "inter_node_gbps", "seq_len", "global_batch_tokens", "tokens", "precision")
DEFAULTS = {"model_source": "params", "params": "13B", "model": "llama-3-8b", "hf_config": "",
            "gpu": "A100-80GB", "gpus_per_node": "8", "nodes": "1", "inter_node_gbps": "",
            "seq_len": "4096", "global_batch_tokens": "", "tokens": "", "precision": ""}
LABELS = {"model_source": "Model source", "params": "Parameters", "model": "Preset",
          "hf_config": "config.json", "gpu": "GPU type", "gpus_per_node": "GPUs per node",
          "nodes": "Nodes", "inter_node_gbps": "Network", "seq_len": "Sequence length",
          "global_batch_tokens": "Global batch", "tokens": "Tokens to train", "precision": "Precision"}
MODEL_SOURCES = ("params", "preset", "hf_config")
MAX_FIELDS = 2 * len(FIELDS)
MAX_GPUS_PER_NODE = 72  # an NVL72 rack is one NVLink domain
# Request fields that are not form fields, shown next to the form field that sets them.
_FORM_FIELD = {"gpus": "gpu", "grad_accum": "global_batch_tokens", "micro_batch": "seq_len"}


@dataclass
class FormState:
    """What the user typed (re-rendered as typed) and the errors by form field."""

    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    """Form field -> message; the key `form` holds an error that belongs to no one field."""

    def add(self, name: str, message: str, allowed: str | None = None) -> None:
        name = name.split(".")[0]
        name = _FORM_FIELD.get(name, name)
        if name not in FIELDS:
            name, message = "form", f"{name}: {message}"
        text = f"{message} (allowed: {allowed})" if allowed else message
        self.errors.setdefault(name, text)


def parse_body(body: bytes) -> FormState:
    """Form values from an urlencoded body; unknown names are ignored, blanks mean default."""
    values = dict(DEFAULTS)
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        state = FormState(values=values)
        state.add("form", "the form data could not be read")
        return state
    values.update({k: v.strip() for k, v in pairs if k in FIELDS})
    return FormState(values=values)


def _int_field(state: FormState, name: str, high: int) -> int | None:
    text = state.values[name]
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or not 1 <= int(text) <= high:
        state.add(name, f"{text!r} is not a whole number from 1 to {high}", f"1 to {high}")
        return None
    return int(text)


def request_data(state: FormState) -> dict:
    """The request body the form describes; errors of the GPU fields go into `state`."""
    v = state.values
    data: dict = {}
    source = v["model_source"] if v["model_source"] in MODEL_SOURCES else "params"
    if source == "params":
        data["params"] = v["params"]
    elif source == "preset":
        data["model"] = v["model"]
    elif not v["hf_config"]:
        state.add("hf_config", "paste the contents of a config.json, or choose another source")
    else:
        try:
            data["hf_config"] = json.loads(v["hf_config"])
        except json.JSONDecodeError as exc:
            state.add("hf_config", f"not valid JSON: {exc.msg} at line {exc.lineno}",
                      "the contents of a config.json")
        except (ValueError, RecursionError):  # a 5000-digit integer; nesting past the parser
            state.add("hf_config", "not a config.json: numbers too long or nesting too deep",
                      "the contents of a config.json")
    per_node = _int_field(state, "gpus_per_node", MAX_GPUS_PER_NODE)
    nodes = _int_field(state, "nodes", MAX_GPUS)
    if per_node and nodes:
        data["gpus"] = f"{nodes}x{per_node}x{v['gpu']}"
    for name in ("inter_node_gbps", "seq_len", "global_batch_tokens", "tokens", "precision"):
        if v[name]:
            data[name] = v[name]
    return data


def validate(state: FormState) -> RecommendRequest | None:
    """The request, or None with every error recorded in `state`."""
    data = request_data(state)
    try:
        req = RecommendRequest.model_validate(data)
    except ValidationError as exc:
        for err in field_errors([dict(e) for e in exc.errors()]):
            state.add(err.field, err.message, err.allowed)
        return None
    if state.errors:
        return None
    return req


def record(state: FormState, exc: InvalidInput) -> None:
    state.add(exc.field, exc.message, exc.allowed)
