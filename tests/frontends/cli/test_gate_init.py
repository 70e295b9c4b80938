"""``geotoolkit gate init``: create a PostgreSQL gate's tables ahead of time, hide passwords."""

from __future__ import annotations

import pytest

from geotoolkit.frontends.cli import main

SECRET = "hunter2-pw"


@pytest.mark.parametrize("url", [
    f"host=127.0.0.1 port=1 user=postgres password={SECRET} dbname=test",
    f"mysql://root:{SECRET}@127.0.0.1/test",
])
def test_a_url_that_names_no_gate_is_refused_without_its_password(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "init", url]) == 2
    out, err = capsys.readouterr()
    assert "not a gate URL" in err and "***" in err
    assert SECRET not in out + err


@pytest.mark.parametrize("url", ["sqlite:///gate.sqlite", "redis://:hunter2-pw@127.0.0.1:1/0",
                                 "memory://"])
def test_gates_made_on_first_use_need_no_init(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "init", url]) == 0
    out, err = capsys.readouterr()
    assert "created on first use" in out and SECRET not in out + err


@pytest.mark.postgres
def test_a_postgres_gate_is_initialised(postgres_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "init", postgres_dsn]) == 0
    assert capsys.readouterr().out == "gate tables ready\n"
