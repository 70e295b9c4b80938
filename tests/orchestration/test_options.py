"""GeocodeOptions: one frozen, validated configuration, taken whole by every front end."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from pathlib import Path

import httpx
import pytest

from geotoolkit import ConfigurationError
from geotoolkit.engine import EngineSettings
from geotoolkit.frontends import accessor, addresses, cli
from geotoolkit.frontends import dask as gdask
from geotoolkit.gate import Cap
from geotoolkit.orchestration.job import COLUMN_ARGUMENTS
from geotoolkit.orchestration.options import GeocodeOptions, option_names
from geotoolkit.policy import RatePolicy
from geotoolkit.providers import Nominatim, OpenCage

SECRET = "sk-test-0123456789abcdef"
AGENT = "geotoolkit-tests/1.0 (tests@example.org)"


def test_a_provider_by_name_is_resolved_once_with_the_registry_rate() -> None:
    options = GeocodeOptions(provider="opencage", api_key=SECRET, gate="memory://")
    assert isinstance(options.provider, OpenCage)
    assert options.resolved_provider.default_rate == 1.0
    assert SECRET not in repr(options) and SECRET not in repr(options.provider)


def test_a_missing_key_or_a_non_provider_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="api_key"):
        GeocodeOptions(provider="google")
    with pytest.raises(ConfigurationError, match="name such as"):
        GeocodeOptions(provider=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="constructor"):
        GeocodeOptions(provider=OpenCage(api_key=SECRET), api_key="other")


@pytest.mark.parametrize(("name", "value", "message"), [
    ("concurrency", 0, "concurrency"), ("concurrency", 2.5, "concurrency"),
    ("max_attempts", True, "max_attempts"), ("rate", -1.0, "rate"), ("rate", "fast", "rate"),
    # the command line's --rate unlimited, in Python: it said only "requests per second"
    ("rate", "unlimited", r"rate=math\.inf for no limit \(--rate unlimited\)"),
    ("request_deadline_seconds", 0, "request_deadline_seconds"),
    ("max_response_bytes", 0, "max_response_bytes"),
    ("max_wait_seconds", float("nan"), "max_wait_seconds"), ("cap", -3, "cap"),
    ("gate", "ftp://nowhere", "gate URL"), ("cache", "mongodb://x", "cache URL"),
    ("gate", "sqlite:/tmp/gate.sqlite", "gate URL"), ("cache", "sqlite:cache.sqlite", "cache URL"),
    ("cache", True, "cache must be"), ("overwrite_columns", "yes", "overwrite_columns"),
    ("fallback_on", None, "fallback_on takes"), ("fallback_on", 5, "fallback_on takes"),
    ("fallback_on", [["failed"]], "fallback_on takes"), ("fallback_on", "matched", "fallback_on"),
    # refused here, not only when a cache opens: with cache=False (the demo) it passed in silence
    ("no_match_ttl_seconds", -1.0, "no_match_ttl_seconds"),
    ("no_match_ttl_seconds", float("nan"), "no_match_ttl_seconds"),
    ("no_match_ttl_seconds", "a week", "no_match_ttl_seconds"),
    # an httpx.Timeout passed unchecked: every row then failed after 6 timed-out attempts
    ("timeout", httpx.Timeout(0.0), "timeout.connect"),
    ("timeout", httpx.Timeout(5.0, read=-1.0), "timeout.read"),
    ("timeout", httpx.Timeout(float("nan")), "timeout.connect"),
])
def test_bad_values_are_refused_when_built(name: str, value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        GeocodeOptions(provider="photon", **{name: value})


def test_values_are_normalised() -> None:
    options = GeocodeOptions(provider="photon", rate=2, cap=100)
    assert options.rate == RatePolicy(rate=2.0) and options.cap == Cap(100, "day")
    assert dataclasses.replace(options, rate=5).rate == RatePolicy(rate=5.0)


def test_validation_opens_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with pytest.raises(ConfigurationError):
        GeocodeOptions(provider="photon", cache=f"sqlite:///{cache}", gate="sqlite:///x",
                       concurrency=0)
    assert list(tmp_path.iterdir()) == []


def test_repr_hides_passwords_and_shows_what_differs() -> None:
    options = GeocodeOptions(provider="photon", gate="redis://:hunter2@127.0.0.1:6379/0?x=1",
                             cache="postgresql://u:pw2@db/x?password=pw2", rate=3)
    text = repr(options)
    assert "hunter2" not in text and "pw2" not in text
    assert "rate=RatePolicy(rate=3.0" in text and "concurrency" not in text


@pytest.mark.parametrize("stores", [{"gate": "redis://:hunter2/pw2@127.0.0.1:6379/0"},
                                    {"cache": "postgresql://u:hunter2@pw2@db/x"},
                                    {"gate": "ftp://u:hunter2@pw2@host/x"}])
def test_a_store_url_whose_password_is_not_percent_encoded_is_refused_unseen(
        stores: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="percent-encode") as info:
        GeocodeOptions(provider="photon", **stores)
    assert "hunter2" not in str(info.value) and "pw2" not in str(info.value)


def test_from_env_supplies_gate_and_cache_only_when_not_given() -> None:
    env = {"GEOTOOLKIT_GATE_URL": "memory://", "GEOTOOLKIT_CACHE_URL": "memory://"}
    options = GeocodeOptions.from_env(env, provider="photon")
    assert (options.gate, options.cache) == ("memory://", "memory://")
    options = GeocodeOptions.from_env(env, provider="photon", gate="sqlite:///g", cache=False)
    assert (options.gate, options.cache) == ("sqlite:///g", False)


def test_options_are_picklable_for_dask_workers() -> None:
    options = GeocodeOptions(provider=Nominatim("http://127.0.0.1:9", user_agent=AGENT,
                                                api_key=SECRET), gate="memory://")
    back = pickle.loads(pickle.dumps(options))
    assert repr(back) == repr(options) and back.provider.gate_key == options.provider.gate_key


def test_engine_settings_are_a_base_of_the_options() -> None:
    settings = {f.name for f in dataclasses.fields(EngineSettings)}
    assert settings <= set(option_names()) and issubclass(GeocodeOptions, EngineSettings)


def test_every_option_is_documented_once_on_the_object() -> None:
    doc = GeocodeOptions.__doc__ or ""
    for name in option_names():
        assert f"\n    {name}\n" in doc, name


# -- every front end takes exactly the options ----------------------------------------------


def _keywords(func: object, own: set[str]) -> set[str]:
    return set(inspect.signature(func).parameters) - own  # type: ignore[arg-type]


def test_front_ends_accept_exactly_the_options() -> None:
    options, columns = set(option_names()), set(COLUMN_ARGUMENTS)
    assert _keywords(accessor.GeocodeAccessor.run,
                     {"self", "column", "progress", "background", *columns}) == options
    assert _keywords(addresses.geocode, {"addresses", "progress"}) == options
    assert _keywords(gdask.geocode, {"ddf", "column", "client", "across_partitions", *columns}) == options


def test_the_cli_has_a_flag_for_every_option_that_has_one() -> None:
    fields = GeocodeOptions.__dataclass_fields__.values()
    with_flags = {f.name for f in fields if f.metadata.get("cli") is not None}
    parser = cli._parser()
    geocode = parser._subparsers._group_actions[0].choices["geocode"]  # type: ignore[union-attr]
    dests = {a.dest for a in geocode._actions}
    assert with_flags <= dests
    seams = {f.name for f in fields if f.metadata.get("seam")}
    assert not seams & dests  # test seams never reach the command line


def test_tab_completion_in_a_notebook_shows_the_options() -> None:
    pd = pytest.importorskip("pandas")
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    from IPython.core.completer import provisionalcompleter

    shell = interactiveshell.InteractiveShell.instance()
    try:
        shell.user_ns["df"] = pd.DataFrame({"address": ["Vaduz"]})
        for typed, wanted in (("df.geocode.run(max_att", "max_attempts="),
                              ("df.geocode.run(overwrite", "overwrite_columns="),
                              ("df.geocode.run(stre", "street=")):
            with provisionalcompleter():
                matches = [c.text for c in shell.Completer.completions(typed, len(typed))]
            assert wanted in matches, (typed, matches)
    finally:
        interactiveshell.InteractiveShell.clear_instance()


@pytest.mark.parametrize(("given", "nearest"), [
    (["--concurency", "2"], "--concurrency"), (["--max-wait", "2", "--timout", "3"], "--timeout"),
    (["--no-match-ttl", "5", "--fallback", "failed", "--min-precison", "street"], "--min-precision"),
])
def test_a_misspelt_flag_names_the_nearest_one(capsys: pytest.CaptureFixture[str], given: list[str],
                                               nearest: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["geocode", "in.csv", "-o", "out.gpkg", *given])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"(did you mean {nearest}?)" in err and "usage: geotoolkit geocode" in err


def test_a_misspelt_option_in_python_names_the_nearest_one() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"address": ["Vaduz"]})
    with pytest.raises(ConfigurationError, match="did you mean 'concurrency'"):
        frame.geocode.run("address", provider="photon", concurency=2)


# -- the README's option table against the code ------------------------------------------------


def _readme_flags() -> dict[str, str]:
    """The README's table of command-line options: flag (as written) -> its meaning."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("Options:\n\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ", 1) for line in table.splitlines()[2:]]
    return {flag.strip("| `"): meaning for flag, meaning in rows}


def test_the_readme_option_table_matches_the_cli() -> None:
    import re

    from geotoolkit.providers.registry import PROVIDERS

    geocode = cli._parser()._subparsers._group_actions[0].choices["geocode"]  # type: ignore[union-attr]
    actions = {s: a for a in geocode._actions for s in a.option_strings}
    table = _readme_flags()
    assert len(table) >= 10
    for written in table:
        flag, _, metavar = written.partition(" ")
        assert flag in actions, f"the README lists {flag}, which geotoolkit geocode does not take"
        choices = actions[flag].choices
        if choices is not None and "\\|" in metavar:  # --progress auto|text|json|none
            assert metavar.split("\\|") == list(choices), flag
    named = re.findall(r"`(\w+)`", table["--provider NAME"].split("([docs", 1)[0])
    assert sorted(named) == sorted(PROVIDERS)
    assert "geotoolkit geocode --help" in (Path(__file__).resolve().parents[2]
                                          / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("flags", [
    ["--gate", "memory://", "--gate-env", "GEOTOOLKIT_TEST_URL"],
    ["--cache", "none", "--cache-env", "GEOTOOLKIT_TEST_URL"],
])
def test_a_url_and_its_env_flag_together_are_refused(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        flags: list[str]) -> None:
    """One of the two was dropped in silence, and not the same one: --gate beat --gate-env
    while --cache-env beat --cache (``gate status`` already refused a URL with --gate-env)."""
    monkeypatch.setenv("GEOTOOLKIT_TEST_URL", "memory://")
    source = tmp_path / "in.csv"
    source.write_text("address\nnowhere\n", encoding="utf-8")
    code = cli.main(["geocode", str(source), "-o", str(tmp_path / "out.gpkg"),
                     "--user-agent", AGENT, "--base-url", "http://127.0.0.1:9", *flags])
    assert code == 2
    assert f"give {flags[0]} or {flags[2]}, not both" in capsys.readouterr().err
    assert not (tmp_path / "out.gpkg").exists()


def test_the_demo_takes_its_cache_from_cache_env(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("GEOTOOLKIT_TEST_URL", f"sqlite:///{tmp_path / 'cache.sqlite'}")
    source = tmp_path / "in.csv"
    source.write_text('address\n"Städtle 38, 9490 Vaduz"\n', encoding="utf-8")
    code = cli.main(["demo", str(source), "-o", str(tmp_path / "out.gpkg"), "--progress", "none",
                     "--gate", "memory://", "--cache-env", "GEOTOOLKIT_TEST_URL"])
    assert code == 0 and (tmp_path / "cache.sqlite").is_file()


def test_the_cli_can_replace_a_files_own_lon_lat(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV with old lon/lat columns was refused with 'pass overwrite_columns=True', which
    no flag could say."""
    source = tmp_path / "in.csv"
    source.write_text('address,lon,lat\n"Städtle 38, 9490 Vaduz",1.0,2.0\n', encoding="utf-8")
    argv = ["demo", str(source), "-o", str(tmp_path / "out.gpkg"), "--progress", "none",
            "--gate", "memory://"]
    assert cli.main(argv) == 2
    assert "--overwrite-columns" in capsys.readouterr().err
    assert cli.main([*argv, "--overwrite-columns"]) == 0
    from geotoolkit.export import read_results

    written = read_results(tmp_path / "out.gpkg")
    assert written.loc[0, "lon"] != 1.0 and written.loc[0, "geocode_status"] == "matched"


def test_rate_with_a_chain_on_the_command_line_says_what_to_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal said only what to do in Python (``Nominatim(..., rate=2)``)."""
    source = tmp_path / "in.csv"
    source.write_text("address\nVaduz\n", encoding="utf-8")
    code = cli.main(["geocode", str(source), "-o", str(tmp_path / "out.gpkg"), "--user-agent",
                     AGENT, "--provider", "census,nominatim", "--rate", "2"])
    assert code == 2 and "leave --rate out" in capsys.readouterr().err
