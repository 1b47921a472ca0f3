"""Worker scripts that tests/test_real_runs.py and tests/test_fsdp2_oracle.py launch in
subprocesses (torchrun, 2 ranks, gloo; or one process with the fake process group)."""
