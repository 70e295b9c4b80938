"""How a provider and its secret become keys: the fleet gate key and the cache namespace.

The API key itself never becomes part of a key: it is hashed. Stdlib only.
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["gate_key", "is_keyed", "namespace"]


def gate_key(host: str, api_key: str | None = None) -> str:
    """The gate key for a provider host and API key; the key itself is only hashed.

    >>> gate_key("nominatim.openstreetmap.org")
    'geotoolkit:nominatim.openstreetmap.org:anonymous'
    >>> "s3cret" in gate_key("api.example.com", "s3cret")
    False
    """
    if not host:
        from geotoolkit.errors import ConfigurationError

        raise ConfigurationError("a gate key needs the provider host")
    if api_key:
        digest = hashlib.sha256(b"geotoolkit-gate:" + api_key.encode()).hexdigest()[:20]
        return f"geotoolkit:{host.lower()}:{digest}"
    return f"geotoolkit:{host.lower()}:anonymous"


def is_keyed(key: str) -> bool:
    """Whether a gate key belongs to one API key, not to every keyless user of the host (one
    team's workers with many user agents and addresses, whose quotas, if any, are their own).

    >>> is_keyed(gate_key("nominatim.openstreetmap.org")), is_keyed(gate_key("h.example", "k"))
    (False, True)
    """
    return not key.endswith(":anonymous")


def namespace(*parts: object) -> str:
    """A short stable digest of the parts that change a provider's answers (cache keys).

    >>> len(namespace("nominatim", "nominatim.openstreetmap.org", ("li",), None))
    16
    """
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
