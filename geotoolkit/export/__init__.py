"""Export results and dead letters: GeoPackage (via pyogrio) or GeoParquet (via pyarrow),
and read them back."""

from geotoolkit.export.checks import FORMATS, check_exportable, format_of
from geotoolkit.export.dtypes import PRECISION_DTYPE, result_dtypes
from geotoolkit.export.letters import dead_letters, input_columns
from geotoolkit.export.readers import read_points, read_results
from geotoolkit.export.writers import write_geopackage, write_geoparquet, write_results

__all__ = ["FORMATS", "PRECISION_DTYPE", "check_exportable", "dead_letters", "format_of",
           "input_columns", "read_points", "read_results", "result_dtypes", "write_geopackage",
           "write_geoparquet", "write_results"]
