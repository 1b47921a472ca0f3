"""Calibration: hold the cost model against real runs and measure the hardware.

`tiny_llama` is a Hugging Face-shaped Llama in plain torch with its advisor `ModelSpec`;
`measure` counts what a rank really holds (model states, buffers, saved activations). The
tests in tests/test_real_runs.py and tests/test_fsdp2_oracle.py compare these counts with the
model's predictions; the other modules here time the hardware and fit the priors.
"""
