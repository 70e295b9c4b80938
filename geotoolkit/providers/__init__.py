"""Geocoding providers: sans-I/O request builders and response parsers.

Choose one by instance (``OpenCage(api_key=...)``) or by name
(``get_provider("opencage", api_key=...)``). Each provider's public service is
described by a ``ProviderPolicy`` in ``POLICIES``: its published rate (the
default ``rate``), caps, and the terms that matter.

Every provider geocodes a ``Query`` (an address); those with a reverse endpoint
(``supports_reverse``) also a ``ReverseQuery`` (a point, ``lon`` first), and those
with a batch endpoint describe it in a ``BatchPolicy`` (``batch``): Census, Mapbox
and ArcGIS.
"""

from geotoolkit.providers.arcgis import ArcGIS
from geotoolkit.providers.base import BatchPolicy, ForwardProvider, Provider, batch_policy, can_reverse
from geotoolkit.providers.census import BATCH_MAX_RECORDS, Census, CensusBatch
from geotoolkit.providers.geonorge import Geonorge
from geotoolkit.providers.google import Google
from geotoolkit.providers.here import Here
from geotoolkit.providers.locationiq import LocationIQ
from geotoolkit.providers.mapbox import Mapbox
from geotoolkit.providers.nominatim import PUBLIC_NOMINATIM, Nominatim
from geotoolkit.providers.opencage import OpenCage
from geotoolkit.providers.pelias import Pelias
from geotoolkit.providers.photon import Photon
from geotoolkit.providers.policies import (
    LARGE_BATCH_ROWS,
    POLICIES,
    ProviderPolicy,
    UsagePolicyWarning,
    check_usage_policy,
    get_policy,
    policy_for,
)
from geotoolkit.providers.registry import PROVIDERS, get_provider, resolve_provider

__all__ = [
    "BATCH_MAX_RECORDS",
    "LARGE_BATCH_ROWS",
    "POLICIES",
    "PROVIDERS",
    "PUBLIC_NOMINATIM",
    "ArcGIS",
    "BatchPolicy",
    "Census",
    "CensusBatch",
    "ForwardProvider",
    "Geonorge",
    "Google",
    "Here",
    "LocationIQ",
    "Mapbox",
    "Nominatim",
    "OpenCage",
    "Pelias",
    "Photon",
    "Provider",
    "ProviderPolicy",
    "UsagePolicyWarning",
    "batch_policy",
    "can_reverse",
    "check_usage_policy",
    "get_policy",
    "get_provider",
    "policy_for",
    "resolve_provider",
]
