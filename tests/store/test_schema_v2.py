"""Schema v2: a stored match keeps its precision, score and place, on every store backend.

A rerun that asks a different minimum precision, or the full answer, must find
everything in the cache. Stores written by the first release are upgraded in
place and still read; provider text is cut before it lands in the cache.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from geotoolkit.results import PRECISIONS, Match, NoMatch, Place
from geotoolkit.store import ResultStore, SQLiteStore
from geotoolkit.store.base import MAX_TEXT_CHARS, decode_place, encode_place

FULL_PLACE = Place(
    place_id="ChIJ-äöü-123", osm_type="way", osm_id=2**40 + 7, housenumber="38", street="Städtle",
    postcode="9490", locality="Vaduz", region="Oberland", country_code="li",
    bbox=(9.5205, 47.1395, 9.5215, 47.1405),
)

#: The first release's SQLite schema (user_version 1).
_V1_SQLITE = """
CREATE TABLE results (
    key TEXT PRIMARY KEY NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('matched', 'no_match')),
    lon REAL, lat REAL,
    label TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
    provider TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 1,
    stored_at REAL NOT NULL
) WITHOUT ROWID
"""

#: The first release's PostgreSQL table.
_V1_POSTGRES = """
CREATE TABLE geotoolkit_results (
    key text PRIMARY KEY,
    status text NOT NULL CHECK (status IN ('matched', 'no_match')),
    lon double precision, lat double precision,
    label text NOT NULL DEFAULT '', reason text NOT NULL DEFAULT '',
    provider text NOT NULL DEFAULT '', attempts integer NOT NULL DEFAULT 1,
    stored_at double precision NOT NULL
)
"""

_OLD_ROWS = [
    ("old:match", "matched", 9.52, 47.14, "Vaduz", "", "nominatim", 2, 1_700_000_000.0),
    ("old:none", "no_match", None, None, "", "nothing here", "nominatim", 1, 1_700_000_000.0),
]


def _old_outcomes_read_back(store: Any) -> None:
    found = store.get_many(["old:match", "old:none"])
    assert found["old:match"] == Match(lon=9.52, lat=47.14, label="Vaduz", provider="nominatim",
                                       attempts=2, precision="unknown", score=None, place=Place())
    assert found["old:none"] == NoMatch(reason="nothing here", provider="nominatim")


def test_every_field_of_a_match_round_trips(make: Any, prefix: str) -> None:
    store = make()
    assert isinstance(store, ResultStore)
    full = Match(lon=9.52, lat=47.14, label="Städtle 38, 9490 Vaduz", provider="opencage",
                 attempts=2, precision="interpolated", score=0.8125, place=FULL_PLACE)
    bare = Match(lon=1.0, lat=2.0)
    partial = Match(lon=3.0, lat=4.0, precision="locality", score=0.0,
                    place=Place(locality="Schaan", country_code="li"))
    store.put_many([(prefix + "full", full), (prefix + "bare", bare), (prefix + "partial", partial)])
    found = store.get_many([prefix + "full", prefix + "bare", prefix + "partial"])
    assert found == {prefix + "full": full, prefix + "bare": bare, prefix + "partial": partial}
    got = found[prefix + "full"]
    assert isinstance(got, Match) and isinstance(got.place.bbox, tuple)
    assert type(got.place.osm_id) is int and got.score == 0.8125
    bare_back = found[prefix + "bare"]
    assert isinstance(bare_back, Match)
    assert (bare_back.precision, bare_back.score, bare_back.place) == ("unknown", None, Place())


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_round_trips(make: Any, prefix: str, precision: Any) -> None:
    store = make()
    store.put(prefix + "p", Match(lon=1.0, lat=2.0, precision=precision))
    got = store.get_many([prefix + "p"])[prefix + "p"]
    assert isinstance(got, Match) and got.precision == precision


def test_hostile_text_is_cut_before_it_lands_in_the_cache(make: Any, prefix: str) -> None:
    store = make()
    huge = "x" * 50_000_000  # a hostile 50 MB label
    store.put(prefix + "m", Match(lon=1.0, lat=2.0, label=huge,
                                  place=Place(street=huge, place_id="y" * 10_000)))
    store.put(prefix + "n", NoMatch(reason=huge))
    found = store.get_many([prefix + "m", prefix + "n"])
    match, none = found[prefix + "m"], found[prefix + "n"]
    assert isinstance(match, Match) and isinstance(none, NoMatch)
    assert match.label == "x" * MAX_TEXT_CHARS and none.reason == "x" * MAX_TEXT_CHARS
    assert match.place.street == "x" * MAX_TEXT_CHARS
    assert match.place.place_id == "y" * MAX_TEXT_CHARS


def test_a_precision_this_version_does_not_know_reads_as_unknown(make: Any, prefix: str) -> None:
    store = make()
    store.put(prefix + "m", Match(lon=1.0, lat=2.0, precision="rooftop"))  # type: ignore[arg-type]
    got = store.get_many([prefix + "m"])[prefix + "m"]
    assert isinstance(got, Match) and got.precision == "unknown"


@pytest.mark.parametrize("text", [None, "", "not json", "[1, 2]", '"a string"', "{}",
                                  '{"bbox": [1, 2, 3]}', '{"bbox": "1,2,3,4"}',
                                  '{"osm_id": "12"}', '{"osm_id": true}', '{"street": 5}',
                                  '{"unknown": "field"}'])
def test_a_damaged_place_reads_as_empty_fields_never_an_error(text: str | None) -> None:
    assert decode_place(text) == Place()


def test_a_place_survives_json() -> None:
    assert decode_place(encode_place(FULL_PLACE)) == FULL_PLACE
    assert encode_place(Place()) is None


# -- upgrades from the first release -----------------------------------------------------


def _v1_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute(_V1_SQLITE)
        db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", _OLD_ROWS)
        db.execute("PRAGMA user_version = 1")
    db.close()


def test_a_v1_sqlite_file_is_upgraded_in_place_and_still_read(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_sqlite(path)
    store = SQLiteStore(path, no_match_ttl_seconds=None)  # old rows never expire here
    try:
        _old_outcomes_read_back(store)
        full = Match(lon=1.0, lat=2.0, precision="address", score=1.0, place=FULL_PLACE)
        store.put("new", full)
        assert store.get_many(["new"])["new"] == full
    finally:
        store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        columns = [row[1] for row in db.execute("PRAGMA table_info(results)")]
    db.close()
    assert columns[-3:] == ["precision", "score", "place"]
    again = SQLiteStore(path, no_match_ttl_seconds=None)  # opening a v2 file changes nothing
    try:
        _old_outcomes_read_back(again)
    finally:
        again.close()


def test_concurrent_openers_upgrade_a_v1_file_once(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    _v1_sqlite(path)
    start, errors, stores = threading.Barrier(6), [], []

    def open_it() -> None:
        try:
            start.wait(timeout=30)
            stores.append(SQLiteStore(path, no_match_ttl_seconds=None))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert errors == [] and len(stores) == 6
        for store in stores:
            _old_outcomes_read_back(store)
    finally:
        for store in stores:
            store.close()


@pytest.mark.postgres
def test_a_v1_postgres_table_is_upgraded_in_place_and_still_read(schema_dsn: str) -> None:
    import psycopg

    from geotoolkit.store.postgres import PostgresStore

    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        conn.execute(_V1_POSTGRES)
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO geotoolkit_results VALUES "
                               "(%s, %s, %s, %s, %s, %s, %s, %s, %s)", _OLD_ROWS)
    store = PostgresStore(schema_dsn, no_match_ttl_seconds=None)
    try:
        _old_outcomes_read_back(store)
        full = Match(lon=1.0, lat=2.0, precision="street", score=0.5, place=FULL_PLACE)
        store.put("new", full)
        assert store.get_many(["new"])["new"] == full
    finally:
        store.close()
    with psycopg.connect(schema_dsn, autocommit=True) as conn:
        columns = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'geotoolkit_results' ORDER BY ordinal_position")]
    assert columns[-3:] == ["precision", "score", "place"]
