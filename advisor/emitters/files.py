"""Plan -> files: accelerate_config.yaml, ds_config.json (DeepSpeed), launch.sh and PLAN.md,
rendered from templates/ and written atomically into the --out folder.

Templates: jinja2 with StrictUndefined. The YAML is `yaml.safe_dump` of the plan's values, line by
line, with the template adding a comment line above each value the advisor decided; the JSON is
`json.dumps`. templates/ sits at the repository top level (DESIGN.md's layout) and is found next to
this package (a checkout, the editable install) or, installed from a wheel, as the package
`advisor_templates` that pyproject.toml maps it to (`templates_dir`).

Writing: every file is rendered first, then written into a temporary folder beside --out and moved
into place, so an error leaves --out as it was. An existing --out is replaced only when it is empty
or holds a plan this module wrote (its PLAN.md starts with PLAN_MARKER).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import jinja2
import yaml

from advisor.core import schemas
from advisor.core.engines import ZeroConfig
from advisor.core.errors import Infeasible, InvalidInput
from advisor.core.results import Estimate, InfeasiblePlan, Recommendation
from advisor.core.text import MAX_PATH_CHARS, check_text, markdown, one_line
from advisor.core.units import GB, GiB, duration_text
from advisor.emitters import bundle
from advisor.emitters.accelerate import accelerate_config
from advisor.emitters.choices import ACCELERATE_PRECISION, EmitOptions, Plan, Tree, plain, reasons
from advisor.emitters.deepspeed import ds_config
from advisor.emitters.model_config import to_hf_config
from advisor.requests.jobs import run_recommend
from advisor.requests.models import RecommendRequest, validate_request
from advisor.strategies import get_strategy


def templates_dir() -> Path:
    """templates/: beside the checkout (a clone, the editable install), or shipped inside the
    wheel as the package `advisor_templates` (pyproject.toml)."""
    source = Path(__file__).resolve().parents[1] / "templates"
    if source.is_dir():
        return source
    spec = importlib.util.find_spec("advisor_templates")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    raise FileNotFoundError(f"templates not found at {source} nor as the package advisor_templates")


PLAN_MARKER = "<!-- written by advisor: this folder is replaced when a plan is emitted again -->"
MEMORY_PARTS = ("params", "grads", "optimizer", "activations", "logits", "buffers", "overhead")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(templates_dir()),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    filters: dict[str, Callable[..., str]] = {
        "gib": lambda b: f"{b / GiB:.1f}", "gb": lambda b: f"{b / GB:.2f}",
        "ms": lambda s: f"{1e3 * s:.0f}", "pct": lambda f: f"{100 * f:.1f}%",
        "duration": duration_text, "sh": shlex.quote, "json": json.dumps,
        "md": markdown, "comment": one_line}
    env.filters |= filters
    return env


def yaml_text(tree: Tree, title: str) -> str:
    """accelerate_config.yaml: safe_dump's lines, each decided value preceded by its reason."""
    why = {path: text for path, _, text in reasons(tree)}
    dumped = yaml.safe_dump(plain(tree), sort_keys=False, default_flow_style=False, width=1000)
    lines: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for text in dumped.splitlines():
        indent = len(text) - len(text.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, text.strip().split(":", 1)[0]))
        path = ".".join(key for _, key in stack)
        lines.append({"indent": " " * indent, "why": why.get(path, ""), "text": text})
    return environment().get_template("accelerate_config.yaml.j2").render(title=title, lines=lines)


def _title(e: Estimate) -> str:
    c = e.cluster
    return f"{e.strategy} for {e.model.name} on {c.spec} ({c.nodes} x {c.gpus_per_node} {c.gpu})"


def script_notes(e: Estimate, deepspeed: Tree | None) -> list[str]:
    """What the training script must do for this plan, beyond `accelerator.prepare`."""
    w = e.workload
    notes = [f"batch: the DataLoader yields {w.micro_batch} sample(s) of {w.seq_len} tokens per GPU "
             f"(`per_device_train_batch_size` in training_args.json) and the optimizer steps every "
             f"{w.grad_accum} micro-batch(es): a Trainer reads training_args.json "
             "(`TrainingArguments(**json.load(open(\"training_args.json\")))`); a custom loop creates "
             f"`Accelerator(gradient_accumulation_steps={w.grad_accum})` and steps inside "
             "`with accelerator.accumulate(model):`"
             + (" (DeepSpeed reads the same numbers from ds_config.json)" if deepspeed else "")]
    kwargs = bundle.advisor_ac_kwargs(e)
    if kwargs["act_ckpt"] != "none" or kwargs["fused_loss"]:
        notes.append(f"after building the model and before `accelerator.prepare` / `Trainer(...)`: "
                     f"`import json, advisor_ac` then `{bundle.APPLY}` (here: "
                     + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")")
    if w.act_ckpt == "selective":
        notes.append("selective checkpointing is advisor_ac's policy (matmul and attention outputs "
                     "kept, norms and pointwise ops recomputed): keep TrainingArguments' "
                     "gradient_checkpointing false, as training_args.json does, or the Trainer "
                     "replaces it with full checkpointing")
    if w.act_ckpt == "full" and e.engine in ("ddp", "deepspeed"):
        notes.append("full activation checkpointing: training_args.json sets gradient_checkpointing "
                     "for a Trainer; a custom loop gets it from the advisor_ac call above")
    if w.fused_loss:
        notes.append("fused loss: `model(input_ids=..., labels=...).loss` is the loss (HF's: labels "
                     "shifted, -100 ignored) and no logits are returned during training")
    if deepspeed and "optimizer" in deepspeed:
        notes.append("ds_config.json names the optimizer, so create it with "
                     "`accelerate.utils.DummyOptim(model.parameters(), lr=..., weight_decay=...)`; "
                     "DeepSpeed then runs its CPU Adam on the offloaded state")
    notes += [what for name, _, what in bundle.code_changes(w)
              if name not in ("act_ckpt", "fused_loss")]
    if w.sync_each_micro_batch and w.grad_accum > 1:
        notes.append("the estimate reduces gradients every micro-batch: training_args.json sets it "
                     "for a Trainer; a custom loop creates the Accelerator with "
                     "`gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps="
                     f"{w.grad_accum}, sync_each_batch=True)`")
    return notes


def check_emittable(est: Estimate | InfeasiblePlan, options: EmitOptions) -> Estimate:
    """The estimate, if it can become runnable files; else InvalidInput naming the field."""
    if isinstance(est, InfeasiblePlan):
        raise InvalidInput("strategy", f"{est.strategy} cannot run on {est.cluster.spec}: {est.reason}",
                           est.fix)
    if not est.fits:
        raise InvalidInput("strategy", f"{est.strategy} does not fit on {est.cluster.spec}: "
                           f"{est.reason}", est.fix)
    if est.offload == "nvme" and not options.nvme_path:
        raise InvalidInput("nvme_path", f"{est.strategy} swaps parameters and optimizer state to "
                           "NVMe and needs a directory on a local NVMe drive",
                           "--nvme-path /local_nvme (the same path on every node)")
    if est.workload.precision not in ACCELERATE_PRECISION:
        raise InvalidInput("precision", f"emit writes no {est.workload.precision} recipe yet "
                           "(fp8 needs Transformer Engine / torchao settings)", "bf16, fp16, fp32")
    return est


def build_plan(est: Estimate | InfeasiblePlan, options: EmitOptions, why: list[str],
               notes: list[str], folder: Path) -> Plan:
    """The plan for estimate `est`, to be written into `folder` (absolute, final location): one
    emitter per engine, chosen by the estimate's engine config."""
    e = check_emittable(est, options)
    config = e.engine_config
    ds = ds_config(e, config, options) if isinstance(config, ZeroConfig) else None
    ds_path = str(folder / "ds_config.json") if ds else None
    acc = accelerate_config(e, options, ds_path)
    # in order, once each; the defaults assumed are this plan's own (a search's notes list those
    # of every strategy it tried)
    notes = list(dict.fromkeys([*(n for n in notes if not n.startswith("assumed ")),
                                *e.cluster.notes, *e.notes]))
    return Plan(estimate=e, accelerate=acc, deepspeed=ds, why=why, script=script_notes(e, ds),
                notes=notes)


def render(plan: Plan, alternatives: list[tuple[str, Plan]]) -> dict[str, str]:
    """File name -> text for one plan folder."""
    e, env = plan.estimate, environment()
    files = {"accelerate_config.yaml": yaml_text(plan.accelerate, _title(e))}
    if plan.deepspeed is not None:
        files["ds_config.json"] = json.dumps(plain(plan.deepspeed), indent=2) + "\n"
    c = e.cluster
    files["launch.sh"] = env.get_template("launch.sh.j2").render(
        title=_title(e), nodes=c.nodes, gpus_per_node=c.gpus_per_node, deepspeed=plan.deepspeed is not None,
        port=plan.accelerate["main_process_port"].value)
    files["training_args.json"] = json.dumps(bundle.training_args(e), indent=2) + "\n"
    files[bundle.HELPER] = (templates_dir() / "bundle" / bundle.HELPER).read_text()
    files["model_config.json"] = json.dumps(to_hf_config(e.model.architecture), indent=2) + "\n"
    names = sorted([*files, "PLAN.md", "plan.json"])
    files["plan.json"] = bundle.plan_json(e, schemas.to_json(e), names)
    m = e.memory
    files["PLAN.md"] = env.get_template("PLAN.md.j2").render(
        marker=PLAN_MARKER, title=_title(e), e=e, plan=plan, files=names,
        settings=bundle.settings(e), code_changes=bundle.code_changes(e.workload),
        roles=bundle.FILE_ROLES,
        memory=[(p, getattr(m.per_gpu_bytes, p)) for p in MEMORY_PARTS],
        yaml_reasons=reasons(plan.accelerate),
        json_reasons=reasons(plan.deepspeed) if plan.deepspeed else [],
        alternatives=[(path, alt.estimate) for path, alt in alternatives])
    return files


def check_out(out: str | Path) -> Path:
    """The --out folder, resolved, if a plan can be written there: a printable, non-empty path
    whose nearest existing ancestor is a directory. InvalidInput("out", ...) otherwise."""
    text = check_text(str(out), "out", MAX_PATH_CHARS)
    root = Path(text).expanduser().resolve()
    _folder_ok(root)
    ancestor = root.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InvalidInput("out", f"{ancestor} is a file, so {text} cannot be a folder",
                           "a path whose parents are folders")
    return root


def _folder_ok(out: Path) -> None:
    try:
        if out.exists() and not out.is_dir():
            raise InvalidInput("out", f"{out} is a file", "a new folder, or one advisor wrote")
        if out.is_dir() and any(out.iterdir()):
            plan_md = out / "PLAN.md"
            if not (plan_md.is_file() and plan_md.read_text(errors="replace").startswith(PLAN_MARKER)):
                raise InvalidInput("out", f"{out} holds files that advisor did not write",
                                   "a new or empty folder, or one advisor wrote")
    except OSError as exc:
        raise InvalidInput("out", f"cannot use {out}: {exc.strerror or exc}",
                           "a folder you can write") from None


def write_folder(out: Path, files: dict[str, str]) -> None:
    """Write `files` (relative path -> text) as folder `out`, all or nothing; a folder that
    cannot be written (permissions, a read-only or pseudo file system) is InvalidInput("out")."""
    _folder_ok(out)
    try:
        _write_folder(out, files)
    except OSError as exc:
        raise InvalidInput("out", f"cannot write {out}: {exc.strerror or exc}",
                           "a folder you can write") from None


def _write_folder(out: Path, files: dict[str, str]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the plan is meant to be shared
        for rel, text in files.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if path.suffix == ".sh":
                path.chmod(0o755)
        if out.exists():
            old = tmp.with_name(tmp.name + ".old")
            out.rename(old)
            try:
                tmp.rename(out)
            except BaseException:
                old.rename(out)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def alternative_folder(rank: int, e: Estimate) -> str:
    return f"alternatives/{rank}-{e.strategy}"


def write_plans(out: str | Path, chosen: Estimate | InfeasiblePlan,
                options: EmitOptions, why: list[str], notes: list[str],
                alternatives: Sequence[Estimate] = ()) -> list[Plan]:
    """Render the chosen plan into `out` and each alternative into out/alternatives/<rank>-<name>/."""
    root = check_out(out)
    alts = [(alternative_folder(i, a),
             build_plan(a, options, [], notes, root / alternative_folder(i, a)))
            for i, a in enumerate(alternatives, 2)]
    top = build_plan(chosen, options, why, notes, root)
    files = render(top, alts)
    for folder, alt in alts:
        files |= {f"{folder}/{name}": text for name, text in render(alt, []).items()}
    write_folder(root, files)
    return [top] + [alt for _, alt in alts]


def write_recommendation(rec: Recommendation, out: str | Path, alternatives: int,
                         options: EmitOptions) -> list[Plan]:
    """Files for the recommended plan and the next `alternatives` fitting ones."""
    if alternatives < 0:
        raise InvalidInput("alternatives", f"{alternatives} is negative", ">= 0")
    if rec.chosen is None:
        raise Infeasible("no plan fits, so there is nothing to write: " + " ".join(rec.summary))
    fitting = [e for e in rec.estimates if isinstance(e, Estimate) and e.fits]
    misfits = [f"Not {e.strategy}: {e.reason}" + (f"; fix: {e.fix}" if e.fix else "")
               for e in rec.estimates if not e.fits]
    return write_plans(out, fitting[0], options, [*rec.summary, rec.rule_of_thumb, *misfits],
                       rec.notes, fitting[1:1 + alternatives])


def emit_strategy(data: dict, strategy: str, out: str | Path, options: EmitOptions) -> list[Plan]:
    """`advisor emit`: the job in `data` (request fields) under one strategy, at the best
    micro-batch and checkpointing the search finds for it (or those given), written to `out`."""
    get_strategy(strategy)  # InvalidInput naming `strategy` for an unknown name
    rec, _ = run_recommend(validate_request(RecommendRequest, {**data, "strategies": [strategy]}))
    return write_plans(out, rec.estimates[0], options, rec.summary, rec.notes)


def summary_line(plan: Plan, out: str | Path) -> str:
    """One line for the terminal: where the files went and what they hold."""
    e, s = plan.estimate, plan.estimate.workload
    names = ["PLAN.md", "plan.json", "accelerate_config.yaml", *(["ds_config.json"] if plan.deepspeed
                                                                 else []),
             "training_args.json", "model_config.json", bundle.HELPER, "launch.sh"]
    return (f"wrote {out}: {e.strategy}, micro-batch {s.micro_batch} x grad-accum {s.grad_accum}, "
            f"ckpt {s.act_ckpt}, {e.memory.per_gpu_bytes.total / GiB:.1f} GiB/GPU, "
            f"{e.throughput.tokens_per_s_per_gpu:,.0f} tokens/s/GPU ({', '.join(names)})")
