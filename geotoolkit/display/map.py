"""The result on a map: ``result.geocode.explore()``, built on ``GeoDataFrame.explore()``.

Matched points are coloured by precision (one fixed colour per level, from green for
an address to red for a country, purple for a feature such as a river, grey when
unknown); too-coarse matches are drawn
hollow in their own layer, where their coarse point lies; the dead letters are
listed in a table beside the map. A large result draws a sample of at most
:data:`MAX_POINTS` points (every point of 400 000 would make a page of hundreds of MB in
the notebook), and says so. Nothing is fetched while the map is built (the
tiles are loaded by the browser that shows it).

Needs the ``map`` extra: folium, and matplotlib and mapclassify, which
``GeoDataFrame.explore()`` imports.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd

from geotoolkit.errors import ConfigurationError
from geotoolkit.redact import redact
from geotoolkit.results import PRECISIONS
from geotoolkit.schema import result_columns
from geotoolkit.urls import install_extra

__all__ = ["MAX_POINTS", "PRECISION_COLOURS", "ResultMap", "explore"]

#: The colour of each precision on the map, finest first.
PRECISION_COLOURS = {"address": "#1a9850", "interpolated": "#66bd63", "street": "#a6d96a",
                     "postcode": "#fee08b", "locality": "#fdae61", "region": "#f46d43",
                     "country": "#d73027", "feature": "#8073ac", "unknown": "#969696"}

_TABLE_COLUMNS = ("geocode_status", "geocode_reason", "geocode_precision", "geocode_provider")
_MAX_TABLE_ROWS = 200
#: The most points :func:`explore` draws by default (about 3 MB of page).
MAX_POINTS = 5_000
#: The closest the map opens on its points (one point: a few streets around it).
_FIT_MAX_ZOOM = 17


def _require_folium() -> None:
    try:
        import folium  # noqa: F401
        import mapclassify  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"the map needs folium, mapclassify and matplotlib ({exc.name} is missing): "
            f"{install_extra('map')}") from exc


@dataclass
class ResultMap:
    """A map of a result and its dead letters; shown as both side by side in a notebook.

    Attributes
    ----------
    map
        The ``folium.Map`` (add layers to it, or ``map.save("map.html")``).
    dead_letters
        The dead letters listed beside it (:func:`geotoolkit.export.dead_letters`).
    points_drawn, points
        How many points the map draws, of how many the result has (a sample when fewer).
    """

    map: Any
    dead_letters: pd.DataFrame
    points_drawn: int = 0
    points: int = 0

    def sample_html(self) -> str:
        """A note when the map draws a sample of the points, else ``""``."""
        if self.points_drawn >= self.points:
            return ""
        return (f"<p>The map draws {self.points_drawn:,} of {self.points:,} points (a random "
                "sample; <code>explore(max_points=None)</code> draws them all).</p>")

    def table_html(self) -> str:
        """The dead letters as an HTML table (the first 200 rows)."""
        letters = self.dead_letters
        if letters.empty:
            return "<p><b>No dead letters</b>: every row matched.</p>"
        shown = [c for c in (*_own_columns(letters), *_TABLE_COLUMNS) if c in letters.columns]
        table = letters[shown].head(_MAX_TABLE_ROWS).astype(object).where(letters.notna(), "")
        more = len(letters) - len(table)
        note = f"<p>... and {more} more</p>" if more > 0 else ""
        return (f"<p><b>{len(letters)} dead letter{'s' if len(letters) != 1 else ''}</b></p>"
                + redact(table.to_html(escape=True, border=0)) + note)

    def _repr_html_(self) -> str:
        return ('<div style="display:flex;gap:12px;align-items:flex-start;width:100%">'
                f'<div style="flex:3 1 0;min-width:320px">{self.map._repr_html_()}</div>'
                '<div style="flex:2 1 0;min-width:240px;max-height:480px;overflow:auto;'
                f'font-size:12px">{self.sample_html()}{self.table_html()}</div></div>')

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the map and the table to one standalone HTML page; returns its path."""
        target = Path(path)
        page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>geotoolkit result'
                f"</title></head><body>{self._repr_html_()}</body></html>")
        target.write_text(page, encoding="utf-8")
        return target

    def __repr__(self) -> str:
        return f"<ResultMap: {len(self.dead_letters)} dead letters>"


def explore(result: pd.DataFrame, letters: pd.DataFrame, *, max_points: int | None = MAX_POINTS,
            **kwargs: Any) -> ResultMap:
    """The map of ``result`` with its dead ``letters`` beside it (see the module docstring):
    at most ``max_points`` points of each layer, a random sample (``None``: all), each
    carrying only the columns its tooltip and popup show (``tooltip=True``: every column);
    ``kwargs`` go to ``GeoDataFrame.explore()``."""
    if max_points is not None and (isinstance(max_points, bool) or not isinstance(max_points, int)
                                   or max_points < 1):
        raise ConfigurationError(f"max_points must be a positive integer or None, got {max_points!r}")
    _require_folium()
    import folium

    frame = gpd.GeoDataFrame(result) if isinstance(result, gpd.GeoDataFrame) else None
    if frame is None or frame.crs is None:
        raise ConfigurationError("explore() needs a geocoding result (a GeoDataFrame in EPSG:4326)")
    tooltip = _html_names(kwargs.pop("tooltip", _tooltip(frame)))
    if "popup" in kwargs:
        kwargs["popup"] = _html_names(kwargs["popup"])
    frame = _as_html_text(frame)
    matched = frame[frame["geocode_status"] == "matched"]
    coarse = _coarse_points(frame)
    points = len(matched) + (0 if coarse is None else len(coarse))
    matched = _sample(matched, max_points)
    coarse = None if coarse is None else _sample(coarse, max_points)
    drawn = len(matched) + (0 if coarse is None else len(coarse))
    m = kwargs.pop("m", None)
    fit = m is None  # a map of the caller's keeps its view
    if m is None:
        m = folium.Map(location=_centre(frame), zoom_start=12, tiles=kwargs.pop("tiles", "OpenStreetMap"))
    if not matched.empty:
        precision = matched["geocode_precision"].astype(object).fillna("unknown")
        shown = matched.assign(geocode_precision=pd.Categorical(
            precision, categories=[p for p in PRECISIONS if p in set(precision)], ordered=True))
        shown = _shown_columns(shown, tooltip, kwargs.get("popup"))
        m = shown.explore(m=m, column="geocode_precision", cmap=_colours(shown), tooltip=tooltip,
                          name="matched", marker_kwds={"radius": 6}, **kwargs)
    if coarse is not None:
        coarse = _shown_columns(coarse, tooltip, kwargs.get("popup"))
        m = coarse.explore(m=m, color=PRECISION_COLOURS["unknown"], tooltip=tooltip,
                           name="too coarse", style_kwds={"fillOpacity": 0.0, "weight": 2},
                           marker_kwds={"radius": 8})
    if coarse is not None and not matched.empty:
        folium.LayerControl().add_to(m)
    box = _bounds(matched, coarse)
    if fit and box is not None:  # open on every point drawn, as gdf.explore() does
        m.fit_bounds(box, max_zoom=_FIT_MAX_ZOOM)
    return ResultMap(m, letters, points_drawn=drawn, points=points)


def _bounds(*layers: gpd.GeoDataFrame | None) -> list[list[float]] | None:
    """``[[south, west], [north, east]]`` of the points drawn, ``None`` when there are none."""
    boxes = [layer.geometry.total_bounds for layer in layers
             if layer is not None and not layer.geometry.is_empty.all()]
    if not boxes:
        return None
    west, south = min(b[0] for b in boxes), min(b[1] for b in boxes)
    east, north = max(b[2] for b in boxes), max(b[3] for b in boxes)
    return [[float(south), float(west)], [float(north), float(east)]]


def _sample(frame: gpd.GeoDataFrame, most: int | None) -> gpd.GeoDataFrame:
    """At most ``most`` rows of ``frame``, a random sample in their order (the same each time)."""
    if most is None or len(frame) <= most:
        return frame
    import numpy as np

    keep = np.sort(np.random.default_rng(0).choice(len(frame), size=most, replace=False))
    return frame.iloc[keep]


def _shown_columns(frame: gpd.GeoDataFrame, *choices: Any) -> gpd.GeoDataFrame:
    """``frame`` with only the columns the map shows: those of the tooltip and popup
    ``choices`` (all of them when one is ``True``) and the precision it is coloured by.
    Every column goes into every point of the page: a wide result's map was many MB."""
    if any(choice is True for choice in choices):
        return frame
    names = {"geocode_precision"}
    for choice in choices:
        names.update([choice] if isinstance(choice, str) else
                     choice if isinstance(choice, list | tuple) else [])
    keep = [c for c in frame.columns if c in names and c != frame.geometry.name]
    return gpd.GeoDataFrame(frame[keep], geometry=frame.geometry, crs=frame.crs)


def _as_html_text(frame: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """``frame`` with its text cells and column names escaped for HTML: folium's tooltips
    and popups set them as ``innerHTML``, where an address (or a provider's label) such as
    ``<img src=x onerror=...>`` would run in the browser of whoever opens the map."""
    out = pd.DataFrame(frame.drop(columns=[frame.geometry.name]))
    for name in out.columns:
        values = out[name]
        if pd.api.types.is_object_dtype(values.dtype) or pd.api.types.is_string_dtype(
                values.dtype) or isinstance(values.dtype, pd.CategoricalDtype):
            out[name] = values.astype(object).map(_html_text)
    out.columns = _html_names(list(out.columns))
    return gpd.GeoDataFrame(out, geometry=frame.geometry.to_numpy(), crs=frame.crs)


def _html_text(value: object) -> object:
    if isinstance(value, str):
        return html.escape(value)
    if isinstance(value, dict | list | tuple | set):  # folium shows them as JSON
        return html.escape(str(value))
    return value


def _html_names(names: Any) -> Any:
    """Column names (a tooltip's or popup's list, or one name) as :func:`_as_html_text`
    renames them; ``True``/``False`` and other choices unchanged."""
    if isinstance(names, str):
        return html.escape(names)
    if isinstance(names, list | tuple):
        return [html.escape(n) if isinstance(n, str) else n for n in names]
    return names


def _own_columns(frame: pd.DataFrame) -> list[str]:
    """The input's own columns: not geotoolkit's, not a geometry."""
    ours = {*result_columns(frame.columns), "geometry", getattr(frame, "_geometry_column_name", None)}
    return [str(c) for c in frame.columns if c not in ours]


def _tooltip(frame: pd.DataFrame) -> list[str]:
    own = _own_columns(frame)[:4]
    return [*own, *(c for c in ("geocode_label", "geocode_provider", "geocode_precision")
                    if c in frame.columns)]


def _colours(shown: gpd.GeoDataFrame) -> list[str]:
    return [PRECISION_COLOURS[str(c)] for c in shown["geocode_precision"].cat.categories]


def _centre(frame: gpd.GeoDataFrame) -> list[float]:
    """The middle of the matched points (or of the coarse ones), else 0, 0."""
    lon = frame["lon"].dropna()
    lat = frame["lat"].dropna()
    if lon.empty and "geocode_coarse_lon" in frame.columns:
        lon, lat = frame["geocode_coarse_lon"].dropna(), frame["geocode_coarse_lat"].dropna()
    if lon.empty:
        return [0.0, 0.0]
    return [float(lat.median()), float(lon.median())]


def _coarse_points(frame: gpd.GeoDataFrame) -> gpd.GeoDataFrame | None:
    if "geocode_coarse_lon" not in frame.columns:
        return None
    rows = frame[frame["geocode_status"] == "too_coarse"].dropna(
        subset=["geocode_coarse_lon", "geocode_coarse_lat"])
    if rows.empty:
        return None
    points = gpd.points_from_xy(rows["geocode_coarse_lon"], rows["geocode_coarse_lat"], crs="EPSG:4326")
    plain = pd.DataFrame(rows.drop(columns=[rows.geometry.name]))
    return gpd.GeoDataFrame(plain, geometry=points, crs="EPSG:4326")
