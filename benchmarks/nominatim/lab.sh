#!/usr/bin/env bash
# A real Nominatim on loopback, for the opt-in tests against it
# (tests/providers/test_nominatim_lab.py) and benchmarks/nominatim_fleet.py.
#
#   bash benchmarks/nominatim/lab.sh [PBF] [PORT]     # then, in another shell:
#   GEOTOOLKIT_TEST_NOMINATIM_URL=http://127.0.0.1:8088 \
#       python3 -m pytest tests/providers/test_nominatim_lab.py
#
# PBF defaults to Nominatim's own API test data (github.com/osm-search/Nominatim,
# test/testdb/apidb-test-data.pbf: Liechtenstein plus Autauga County, Alabama; OSM data,
# (c) OpenStreetMap contributors, ODbL 1.0), looked for beside this checkout in
# ../shared/data/nominatim/. Installs Debian's osm2pgsql and PostGIS for the running
# PostgreSQL, Nominatim (PyPI nominatim-db and nominatim-api) in its own venv, imports
# the file once (28-37 s on 2 cores, measured) and serves the API on 127.0.0.1:PORT in the
# foreground (Ctrl-C stops it). Needs root (apt-get) and a local PostgreSQL superuser
# reachable as the current user; nothing leaves loopback but the package downloads.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pbf="${1:-$here/../../../shared/data/nominatim/apidb-test-data.pbf}"
port="${2:-8088}"
venv="${NOMINATIM_VENV:-/opt/nominatim-venv}"
project="${NOMINATIM_PROJECT:-/opt/nominatim-project}"
export NOMINATIM_DATABASE_DSN="${NOMINATIM_DATABASE_DSN:-pgsql:dbname=nominatim}"

[ -f "$pbf" ] || { echo "no OSM file at $pbf (pass one: lab.sh FILE.pbf)" >&2; exit 2; }
major="$(psql -AtX -d postgres -c 'SHOW server_version_num' | cut -c1-2)"
if ! command -v osm2pgsql >/dev/null || [ ! -d "/usr/share/postgresql/$major/extension" ] \
        || ! ls "/usr/share/postgresql/$major/extension/" | grep -q '^postgis.control$'; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q osm2pgsql "postgresql-$major-postgis-3"
fi
if [ ! -x "$venv/bin/nominatim" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q nominatim-db nominatim-api falcon uvicorn
fi
# The web user Nominatim grants read access to.
psql -AtX -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname = 'www-data'" | grep -q 1 \
    || psql -X -d postgres -c 'CREATE ROLE "www-data" LOGIN'
mkdir -p "$project"
cd "$project"
if ! psql -AtX -d postgres -c "SELECT 1 FROM pg_database WHERE datname = 'nominatim'" | grep -q 1; then
    "$venv/bin/nominatim" import --osm-file "$pbf" --offline --threads "$(nproc)"
fi
exec "$venv/bin/nominatim" serve --server "127.0.0.1:$port" --engine falcon
