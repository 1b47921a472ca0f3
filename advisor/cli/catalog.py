"""`advisor gpus` and `advisor models`: the catalogs as tables or JSON."""

from __future__ import annotations

import json

from rich.table import Table

from advisor.core.hardware import gpu_catalog
from advisor.core.model import model_presets


def gpu_rows() -> list[dict]:
    return [g.model_dump(mode="json") for g in sorted(gpu_catalog().values(), key=lambda g: g.name)]


def model_rows() -> list[dict]:
    return [{**m.model_dump(mode="json", exclude={"params_override"}), "params": m.params}
            for m in sorted(model_presets().values(), key=lambda m: m.params)]


def print_catalog(which: str, as_json: bool) -> None:
    rows = gpu_rows() if which == "gpus" else model_rows()
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="GPU catalog" if which == "gpus" else "Model presets", title_justify="left")
    if which == "gpus":
        cols = ("name", "memory GiB", "bf16 TFLOPS", "fp8 TFLOPS", "HBM GB/s", "intra-node link",
                "GB/s/dir", "also")
        for col in cols:
            table.add_column(col)
        for g in rows:
            table.add_row(g["name"], f"{g['memory_in_GiB']:g}",
                          f"{g['peak_bf16_dense_in_TFLOPS'] or '-'}",
                          f"{g['peak_fp8_dense_in_TFLOPS'] or '-'}",
                          f"{g['hbm_bandwidth_in_GB_per_sec']:g}", g["intra_node_link"],
                          f"{g['intra_node_bandwidth_in_GB_per_sec']:g}",
                          ", ".join(g["default_for"] + g["aliases"]))
    else:
        for col in ("name", "params", "layers", "hidden", "heads", "kv", "ffn", "vocab", "layer class"):
            table.add_column(col)
        for m in rows:
            table.add_row(m["name"], f"{m['params']:,}", str(m["layers"]), str(m["hidden"]),
                          str(m["heads"]), str(m["kv_heads"]), str(m["ffn"]), str(m["vocab"]),
                          m["decoder_layer_class"])
    from advisor.cli.report import make_console

    make_console().print(table)
