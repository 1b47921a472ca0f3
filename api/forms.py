"""The web form's data: read from the body (urlencoded, or multipart with an uploaded
config.json), kept as typed, turned into the same request model as the REST API.

Every error comes back keyed by the form field it belongs to, so the page shows it next to that
field. The fields themselves are derived from the request model (api/form_fields.py).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from urllib.parse import parse_qsl

from pydantic import ValidationError

from advisor.cli.flags import flag_name
from advisor.core.errors import InvalidInput
from advisor.core.hardware import MAX_GPUS
from advisor.emitters.choices import EmitOptions
from api.errors import field_errors
from api.form_fields import FORM_DEFAULTS, MODEL_GROUP, SOURCES, by_name, fields, gpu_nodes, groups
from api.schemas import ConfigsRequest, RecommendRequest

URLENCODED, MULTIPART = "application/x-www-form-urlencoded", "multipart/form-data"
UPLOAD = "hf_config_file"  # the file input beside the pasted config.json
SOURCE_FIELDS = {key: names for key, _, names in SOURCES}
# Request fields the form shows as another field.
_SHOWN_AS = {"gpus": "gpu"}


def max_fields() -> int:
    """Name=value pairs a body may hold: every field, each checks box, and as many again."""
    return 2 * (len(fields()) + sum(len(f.choices) for f in fields() if f.widget == "checks") + 2)


def defaults() -> dict[str, str]:
    return {"model_source": FORM_DEFAULTS["model_source"], **{f.name: f.default for f in fields()}}


@dataclass
class FormState:
    """What the user typed (re-rendered as typed) and the errors by form field."""

    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    """Form field -> message; the key `form` holds an error that belongs to no one field."""
    upload: str | None = None
    """The name of the uploaded config.json, if one came."""
    data: dict = field(default_factory=dict)
    """The request fields the form gave, as typed (what `validate` read)."""

    @property
    def source(self) -> str:
        chosen = self.values.get("model_source", "")
        return chosen if chosen in SOURCE_FIELDS else FORM_DEFAULTS["model_source"]

    def source_fields(self) -> list[str]:
        return list(SOURCE_FIELDS[self.source]) or [
            f.name for f in fields() if f.group == MODEL_GROUP and f.source == self.source]

    def add(self, name: str, message: str, allowed: str | None = None) -> None:
        name = _SHOWN_AS.get(name.split(".")[0], name.split(".")[0])
        f = by_name().get(name)
        if f is not None and f.group == MODEL_GROUP and name not in self.source_fields():
            name = self.source_fields()[0]  # "give the model one way": said where the user looks
        elif f is None and name != "form":
            name, message = "form", f"{name}: {message}"
        text = f"{message} (allowed: {allowed})" if allowed else message
        self.errors.setdefault(name, text)

    def open_groups(self) -> set[str]:
        """Groups whose folded fields hold an error or a value other than the default."""
        return {g.key for g in groups() for f in g.advanced
                if f.name in self.errors or self.values.get(f.name, f.default) != f.default}


def _pairs(body: bytes, content_type: str, state: FormState) -> list[tuple[str, str]]:
    """(name, value) pairs of the body; an uploaded config.json becomes the pasted one."""
    media = content_type.split(";")[0].strip().lower()
    if media == URLENCODED:
        return parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=max_fields())
    message = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    parts = list(message.iter_parts()) if message.is_multipart() else []
    if not parts or len(parts) > max_fields():
        raise ValueError("not multipart form data")
    pairs = []
    for part in parts:
        name = str(part.get_param("name", "", header="content-disposition"))
        raw = part.get_payload(decode=True)
        text = (raw if isinstance(raw, bytes) else b"").decode()
        if name != UPLOAD:
            pairs.append((name, text))
        elif part.get_filename() and text.strip():
            state.upload = str(part.get_filename())
            pairs.append(("hf_config", text))
    return pairs


def parse_body(body: bytes, content_type: str = URLENCODED) -> FormState:
    """Form values from a body; unknown names are ignored, absent ones keep their default. A
    checks field's boxes are joined with commas; of a field given twice the last value counts
    (a ticked box after its hidden "false")."""
    state = FormState(values=defaults())
    try:
        pairs = _pairs(body, content_type, state)
    except (UnicodeDecodeError, ValueError):
        state.add("form", "the form data could not be read")
        return state
    given: dict[str, list[str]] = {}
    for name, value in pairs:
        if name in state.values:
            given.setdefault(name, []).append(value.strip())
    for name, texts in given.items():
        f = by_name().get(name)
        if f is not None and f.widget == "checks":
            state.values[name] = ",".join(p.strip() for t in texts for p in t.split(",") if p.strip())
        else:
            state.values[name] = texts[-1]
    return state


def _int_field(state: FormState, name: str, high: int) -> int | None:
    text = state.values[name] or "1"
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or not 1 <= int(text) <= high:
        state.add(name, f"{text!r} is not a whole number from 1 to {high}", f"1 to {high}")
        return None
    return int(text)


def _json_value(state: FormState, name: str) -> object:
    text = state.values[name]
    if not text:
        state.add(name, "paste the contents of a config.json or choose the file, or choose "
                  "another model source")
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        state.add(name, f"not valid JSON: {exc.msg} at line {exc.lineno}", "the contents of a config.json")
    except (ValueError, RecursionError):  # a 5000-digit integer; nesting past the parser
        state.add(name, "not a config.json: numbers too long or nesting too deep",
                  "the contents of a config.json")
    return None


def _gpus(state: FormState) -> str | None:
    """The cluster spec NODESxPER_NODExGPU; blank GPUs per node: the GPU's typical server."""
    gpu, per_node = state.values["gpu"], state.values["gpus_per_node"]
    nodes = _int_field(state, "nodes", MAX_GPUS)
    if nodes is None:
        return None
    if not (per_node.isascii() and per_node.isdigit() and 0 < len(per_node) <= 4):
        per_node = str(gpu_nodes().get(gpu, 8))  # blank or not a number: the model says which
    return f"{nodes}x{int(per_node)}x{gpu}"


def request_data(state: FormState) -> dict:
    """The request body the form describes: the fields of the chosen model source, and every
    other field that is not blank (blank: the model's default)."""
    data: dict = {}
    for f in fields():
        text = state.values[f.name]
        if f.name in ("gpu", "nodes") or (f.group == MODEL_GROUP and f.name not in state.source_fields()):
            continue
        if f.widget == "json":
            value = _json_value(state, f.name)
            if value is not None:
                data[f.name] = value
        elif f.widget == "checks":
            chosen = [v for v in text.split(",") if v]
            if not chosen:
                state.add(f.name, "choose at least one", ", ".join(v for v, _ in f.choices))
            elif set(chosen) != {v for v, _ in f.choices}:
                data[f.name] = chosen
        elif f.widget == "check":
            if text != f.default:
                data[f.name] = text
        elif text:
            data[f.name] = int(text) if f.ints and text.isdigit() and len(text) < 4 else text
        elif f.name in SOURCE_FIELDS[state.source]:
            state.add(f.name, "fill this in, or choose another model source")
    gpus = _gpus(state)
    if gpus is not None:
        data["gpus"] = gpus
    return data


def validate(state: FormState) -> ConfigsRequest | None:
    """The request (the job, plus what its config files need), or None with every error recorded
    in `state`. The NVMe path is checked where it is used (check_files, or the download)."""
    data = state.data = request_data(state)
    try:
        req = ConfigsRequest.model_validate(data)
    except ValidationError as exc:
        for err in field_errors([dict(e) for e in exc.errors()]):
            state.add(err.field, err.message, err.allowed)
        return None
    except InvalidInput as exc:  # a model validator's, naming its field
        record(state, exc)
        return None
    return None if state.errors else req


def check_files(state: FormState, req: ConfigsRequest) -> None:
    """Record now what the download would refuse of the config files' own options."""
    try:
        EmitOptions(nvme_path=req.nvme_path)
    except InvalidInput as exc:
        record(state, exc)


def command_line(state: FormState) -> str:
    """`advisor recommend` with the flags the form set, as typed, and `--out` for the files
    the download gives (the config.json named by its file: the CLI reads a path)."""
    words = ["advisor", "recommend"]
    files = {k: state.data[k] for k in ("strategy", "nvme_path") if k in state.data}
    for name, value in state.data.items():
        info = RecommendRequest.model_fields.get(name)
        if info is None or str(value) == str(info.default) or (name == "strategies" and "strategy" in files):
            continue  # a file option, a default as typed, or the strategy the download asks for
        flag = flag_name(name)
        if isinstance(value, dict):
            words += [flag, state.upload or "config.json"]
        elif value in ("true", "false") and by_name()[name].widget in ("check", "select"):
            words.append(flag if value == "true" else "--no-" + flag[2:])
        else:
            words += [flag, ",".join(value) if isinstance(value, list) else str(value)]
    if "strategy" in files:
        words += ["--strategies", files["strategy"]]  # its best plan, as the download's
    words += ["--out", "plan/"] + (["--nvme-path", files["nvme_path"]] if "nvme_path" in files else [])
    return " ".join(shlex.quote(w) for w in words)


def record(state: FormState, exc: InvalidInput) -> None:
    state.add(exc.field, exc.message, exc.allowed)
