"""Command-line flags derived from the request models: one flag per field, named after it
(`seq_len` -> `--seq-len`), its help from the field's docstring, its group from the field's
`x-group`. Values reach the model as the text typed, so the CLI accepts and refuses exactly what
the API does, and says so in the same words (InvalidInput naming the field and the range).

Booleans: a field defaulting to True gets `--no-<name>`, one defaulting to False `--<name>`, one
defaulting to None both (`--[no-]<name>`). A flag given twice, or both forms of a boolean, is an
error (argparse would silently keep the last one). `x-cli` marks the two fields whose command-line
form differs from the JSON one: `path-json` (the flag names a file holding the JSON value) and
`comma-list` (a comma-separated list).
"""

from __future__ import annotations

import argparse
import json
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from advisor.core.errors import InvalidInput
from advisor.core.text import MAX_PATH_CHARS, check_text

MAX_JSON_FILE_BYTES = 1024 * 1024  # a config.json is 1-50 KB; /dev/zero must not be read forever
_NEGATIVE = re.compile(r"^-[0-9.]")


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


class _Once(argparse.Action):
    """Store the value (or `const`), refusing a second, different setting of the same field."""

    def __call__(self, parser, namespace, values, option_string=None):
        value = self.const if self.nargs == 0 else values
        seen: dict[str, str] = namespace.__dict__.setdefault("_given", {})
        if self.dest in seen and (seen[self.dest] != option_string or getattr(namespace, self.dest) != value):
            raise InvalidInput(self.dest, f"given twice ({seen[self.dest]} and {option_string})",
                               "one of them")
        seen[self.dest] = option_string or self.dest
        setattr(namespace, self.dest, value)


def _is_bool(info: FieldInfo) -> bool:
    return info.annotation in (bool, bool | None, typing.Optional[bool])  # noqa: UP045


def _choices(info: FieldInfo) -> tuple:
    """The values of a Literal field (also inside Optional or list), else ()."""
    stack = [info.annotation]
    while stack:
        tp = stack.pop()
        if typing.get_origin(tp) is typing.Literal:
            return typing.get_args(tp)
        stack.extend(typing.get_args(tp))
    return ()


def _literal_ints(info: FieldInfo) -> bool:
    choices = _choices(info)
    return bool(choices) and all(isinstance(v, int) for v in choices)


def add_model_flags(parser: argparse.ArgumentParser, model: type[BaseModel],
                    exclude: tuple[str, ...] = ()) -> None:
    """One flag per field of `model`, in argument groups by the fields' `x-group`."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, info in model.model_fields.items():
        if name in exclude:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        group_name = str(extra.get("x-group", "options"))
        group = groups.get(group_name) or groups.setdefault(group_name, parser.add_argument_group(group_name))
        text = (info.description or "").replace("%", "%%")
        if _is_bool(info):
            if info.default is not True:
                group.add_argument(flag_name(name), dest=name, action=_Once, nargs=0, const=True,
                                   default=None, help=text)
            if info.default is not False:
                group.add_argument(f"--no-{name.replace('_', '-')}", dest=name, action=_Once, nargs=0,
                                   const=False, default=None,
                                   help=text if info.default is True else argparse.SUPPRESS)
            continue
        choices = _choices(info)
        if choices:
            text += f" (one of: {', '.join(map(str, choices))})"
        metavar = {"path-json": "PATH", "comma-list": "A,B,..."}.get(str(extra.get("x-cli")))
        group.add_argument(flag_name(name), dest=name, action=_Once, default=None, metavar=metavar,
                           help=text, required=info.is_required())


def request_data(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The request fields the user gave, as the model's JSON values."""
    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("x-cli") == "path-json":
            value = read_json_file(value, name)
        elif extra.get("x-cli") == "comma-list":
            value = [part.strip() for part in value.split(",") if part.strip()]
        elif _literal_ints(info) and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        data[name] = value
    return data


def read_json_file(path_text: str, field: str) -> Any:
    """The JSON in a local file, read with a size bound; one-line errors naming `field`."""
    check_text(path_text, field, MAX_PATH_CHARS)
    path = Path(path_text)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_JSON_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {path}: {exc.strerror or exc}",
                           "a path to a local JSON file") from None
    if len(raw) > MAX_JSON_FILE_BYTES:
        raise InvalidInput(field, f"{path} is larger than {MAX_JSON_FILE_BYTES // 1024} KiB",
                           "a Hugging Face config.json")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(field, f"{path} is not UTF-8 text (byte {exc.start})",
                           "a Hugging Face config.json") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(field, f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}",
                           "a Hugging Face config.json") from None
    except (ValueError, RecursionError):
        raise InvalidInput(field, f"{path} is not a config.json (numbers too long or nesting too "
                           "deep)", "a Hugging Face config.json") from None


def join_negative_values(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """`--params -7e9` as `--params=-7e9`: argparse reads a value that starts with `-` and is not
    a plain integer as an unknown option. Joined, the model says what the range is."""
    takes_value = {opt for action in _all_actions(parser) if action.nargs != 0
                   for opt in action.option_strings}
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in takes_value and i + 1 < len(argv) and _NEGATIVE.match(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _all_actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_actions(sub)


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors as one line (`advisor: error: ...`) and exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"advisor: error: {message} (see `{self.prog} --help`)\n")
