"""Export results and dead letters: GeoPackage (via pyogrio) or GeoParquet (via pyarrow)."""

from geotoolkit.export.checks import FORMATS, check_exportable, format_of
from geotoolkit.export.letters import dead_letters, input_columns
from geotoolkit.export.writers import write_geopackage, write_geoparquet, write_results

__all__ = ["FORMATS", "check_exportable", "dead_letters", "format_of", "input_columns",
           "write_geopackage", "write_geoparquet", "write_results"]
