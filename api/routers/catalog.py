"""GET /v1/gpus and GET /v1/models: the catalogs, as `advisor gpus --json` / `models --json`."""

from __future__ import annotations

from fastapi import APIRouter

from advisor.cli.catalog import gpu_rows, model_rows
from advisor.core.hardware import GPUSpec
from api.schemas import ModelPreset

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get("/gpus", response_model=list[GPUSpec], summary="The GPU catalog")
def get_gpus() -> list[dict]:
    """Every GPU preset: memory, dense peaks by precision, HBM and link bandwidths, typical node."""
    return gpu_rows()


@router.get("/models", response_model=list[ModelPreset], summary="The model presets")
def get_models() -> list[dict]:
    """Every model preset with its shape and exact parameter count, smallest first."""
    return model_rows()
