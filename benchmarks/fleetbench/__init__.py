"""The fleet benchmark's parts (``benchmarks/fleet.py`` is the command).

- ``spec``: the limiters, the cells of the matrix, their row counts and the issue's targets;
- ``worker``: one fleet worker (a fresh process that imports geotoolkit and starts at once);
- ``loop``: a plain pacing loop without geotoolkit (the reference pacer, the other client);
- ``target``: the rate-limited provider (the simulator, or a real proxy before it);
- ``proxy``: a real rate-limiting proxy on loopback from a generated configuration, as
  ``nginx`` (``limit_req``) and ``haproxy`` (``http_req_rate``) run it;
- ``measure``: the figures, from the limiter's log and the workers' records (pure);
- ``cell``: one run of one cell; ``report``: tables and JSON.
"""
