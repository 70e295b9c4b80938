"""Geocoding providers: sans-I/O request builders and response parsers."""

from geotoolkit.providers.base import Provider
from geotoolkit.providers.nominatim import PUBLIC_NOMINATIM, Nominatim

__all__ = ["PUBLIC_NOMINATIM", "Nominatim", "Provider"]
