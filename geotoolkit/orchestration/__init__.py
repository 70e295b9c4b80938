"""Orchestration: one frozen, validated configuration (``options``) and one way through a run
(``job``: check the input, open the gate and cache, run the engine, build the result frame)."""
