"""Front ends: thin layers over the orchestration (options and jobs) that choose how to take
input, show progress and wait. ``accessor`` (``df.geocode``), ``addresses`` (``geocode()``),
``cli`` (the ``geotoolkit`` command), ``dask`` (partitions on a cluster), ``background``
(jobs that keep the notebook free) and ``orchestrators`` (Prefect, Dagster). A new front
end goes here."""
