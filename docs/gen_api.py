"""Render the public API's numpydoc docstrings into docs/api.md.

Run from the repository root: ``python docs/gen_api.py`` (``--check`` exits 1 when
docs/api.md is out of date). The public names are each listed module's ``__all__``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parent / "api.md"

#: Modules documented, in reading order: what an analyst meets first comes first.
MODULES = [
    "geotoolkit",
    "geotoolkit.frontends.accessor",
    "geotoolkit.frontends.addresses",
    "geotoolkit.orchestration.options",
    "geotoolkit.frontends.background",
    "geotoolkit.frontends.orchestrators",
    "geotoolkit.frontends.dask",
    "geotoolkit.frontends.fleet_watch",
    "geotoolkit.display.widget",
    "geotoolkit.display.fleet_panel",
    "geotoolkit.display.fleet_text",
    "geotoolkit.display.map",
    "geotoolkit.display.text",
    "geotoolkit.display.sinks",
    "geotoolkit.display.model",
    "geotoolkit.progress",
    "geotoolkit.results",
    "geotoolkit.schema",
    "geotoolkit.orchestration.frame",
    "geotoolkit.export",
    "geotoolkit.engine",
    "geotoolkit.policy",
    "geotoolkit.gate",
    "geotoolkit.providers",
    "geotoolkit.store",
    "geotoolkit.clock",
    "geotoolkit.periods",
    "geotoolkit.errors",
    "geotoolkit.testing",
]

_SECTION = re.compile(r"^(?P<title>[A-Z][A-Za-z ]+)\n-{3,}$", re.M)
_SECTIONS = {"Parameters", "Returns", "Yields", "Raises", "Attributes", "Examples", "Notes",
             "See Also", "Warns", "Other Parameters", "References"}


def _annotation(value: Any) -> str:
    text = value if isinstance(value, str) else inspect.formatannotation(value)
    return text.replace("'", "")


def _parameter(p: inspect.Parameter) -> str:
    text = p.name
    if p.kind is p.VAR_POSITIONAL:
        text = "*" + text
    elif p.kind is p.VAR_KEYWORD:
        text = "**" + text
    if p.annotation is not p.empty:
        text += f": {_annotation(p.annotation)}"
    if p.default is not p.empty:
        default = p.default
        shown = (f"{default.__module__}.{default.__qualname__}"
                 if inspect.isroutine(default) and hasattr(default, "__qualname__") else repr(default))
        shown = "<sentinel>" if " at 0x" in shown else shown
        text += f" = {shown}" if p.annotation is not p.empty else f"={shown}"
    return text


def _signature(obj: Any, name: str) -> str:
    """A fenced signature, one parameter per line when it is long; no ``self``."""
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return ""
    params, parts, star = list(sig.parameters.values()), [], False
    for p in params:
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        star = star or p.kind is p.VAR_POSITIONAL
        parts.append(_parameter(p))
        if p.kind is p.POSITIONAL_ONLY and (params[-1] is p or params[params.index(p) + 1].kind
                                            is not p.POSITIONAL_ONLY):
            parts.append("/")
    returns = ""
    if not inspect.isclass(obj) and sig.return_annotation is not sig.empty:
        returns = f" -> {_annotation(sig.return_annotation)}"
    one_line = f"{name}({', '.join(parts)}){returns}"
    if len(one_line) <= 90:
        return f"```python\n{one_line}\n```\n"
    body = "".join(f"    {part},\n" for part in parts)
    return f"```python\n{name}(\n{body}){returns}\n```\n"


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`~?([^`]+)`")


def _rst(text: str) -> str:
    """Inline reST to Markdown: roles and ``literals`` to `code`; ``::`` blocks fenced."""
    text = _ROLE.sub(r"`\1`", text).replace("``", "`")
    out: list[str] = []
    lines, i = text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::") and not line.lstrip().startswith(">>>"):
            out.append(line.rstrip()[:-1] if line.rstrip() != "::" else "")
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            while block and not block[0].strip():
                block.pop(0)
            out += ["", "```", *[b for b in block if b or block], "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _examples(body: str) -> str:
    """Fence doctest blocks as Python."""
    lines, out, fenced = body.splitlines(), [], False
    for line in lines:
        is_doctest = line.startswith((">>>", "...")) or (fenced and line.strip() != "")
        if is_doctest and not fenced:
            out.append("```python")
            fenced = True
        elif not is_doctest and fenced:
            out.append("```")
            fenced = False
        out.append(line)
    if fenced:
        out.append("```")
    return "\n".join(out)


def _section(title: str, body: str) -> str:
    if title == "Examples":
        return f"**Examples**\n\n{_examples(body.strip())}\n"
    if title in ("Parameters", "Attributes", "Raises", "Returns", "Other Parameters", "Yields"):
        items, current = [], None
        for line in body.strip("\n").splitlines():
            if line and not line.startswith(" "):
                current = [f"- `{line.strip()}`"]
                items.append(current)
            elif current is not None and line.strip():
                current.append(line.strip())
        rendered = "\n".join(
            item[0] + (": " + " ".join(item[1:]) if len(item) > 1 else "") for item in items)
        return f"**{title}**\n\n{rendered}\n"
    return f"**{title}**\n\n{body.strip()}\n"


def render_docstring(doc: str | None) -> str:
    """Markdown for one numpydoc docstring: summary, then its sections."""
    if not doc:
        return "*(no docstring)*\n"
    parts = _SECTION.split(doc)
    out = [_examples(_rst(parts[0].strip())) + "\n"]
    for title, body in zip(parts[1::2], parts[2::2], strict=True):
        if title == "Examples":
            out.append(_section(title, body))
        else:
            out.append(_rst(_section(title, body) if title in _SECTIONS
                            else f"**{title}**\n\n{body}\n") + "\n")
    return "\n".join(out)


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    for name, member in vars(cls).items():
        if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
            continue
        doc = inspect.getdoc(member.fget if isinstance(member, property) else member)
        if doc:
            yield name, member


def render_object(qualname: str, obj: Any) -> str:
    kind = "class" if inspect.isclass(obj) else ("function" if callable(obj) else "constant")
    out = [f"### `{qualname}`\n\n*{kind}*\n"]
    if kind == "constant":
        return out[0] + f"\n```python\n{qualname} = {obj!r}\n```\n"[:600]
    out.append(_signature(obj, qualname.rsplit(".", 1)[-1]))
    out.append(render_docstring(inspect.getdoc(obj)))
    if inspect.isclass(obj):
        for name, member in _members(obj):
            if isinstance(member, property):
                out.append(f"#### `{name}` (property)\n\n"
                           + render_docstring(inspect.getdoc(member.fget)))
            else:
                out.append(f"#### `{name}`\n\n{_signature(member, name)}\n"
                           + render_docstring(inspect.getdoc(member)))
    return "\n".join(out)


def render_module(name: str) -> str:
    module = importlib.import_module(name)
    summary = (inspect.getdoc(module) or "").strip()
    out = [f"## `{name}`\n\n{_rst(summary)}\n"]
    for public in getattr(module, "__all__", []):
        obj = getattr(module, public)
        if inspect.ismodule(obj) or (getattr(obj, "__module__", name) != name and name != "geotoolkit"
                                     and not _defined_under(obj, name)):
            continue  # documented where it is defined
        if name == "geotoolkit" and not inspect.ismodule(obj):
            continue  # the top level re-exports; listed in the index below
        out.append(render_object(f"{name}.{public}", obj))
    return "\n".join(out)


def _defined_under(obj: Any, package: str) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module.startswith(package + ".")


def _index() -> str:
    import geotoolkit

    rows = []
    for public in geotoolkit.__all__:
        obj = getattr(geotoolkit, public)
        if inspect.ismodule(obj):
            home = obj.__name__
        elif inspect.isclass(obj) or inspect.isfunction(obj):
            home = obj.__module__
        else:
            home = "geotoolkit.results" if public == "Outcome" else "geotoolkit"
        rows.append(f"| `geotoolkit.{public}` | `{home}` |")
    return ("## Top-level names\n\n`import geotoolkit` re-exports these (and registers the "
            "`df.geocode` accessor):\n\n| name | defined in |\n| --- | --- |\n"
            + "\n".join(rows) + "\n")


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError as exc:  # an optional extra (dask, ...) that is not installed here
        print(f"skipping {name}: {exc}", file=sys.stderr)
        return False
    return True


def render() -> str:
    header = ("# API reference\n\n*Generated by `python docs/gen_api.py` from the numpydoc "
              "docstrings; do not edit by hand.*\n\n")
    modules = [m for m in MODULES[1:] if _importable(m)]
    contents = "\n".join(f"- [`{m}`](#{m.replace('.', '')})" for m in modules)
    body = [render_module(m) for m in modules]
    return header + contents + "\n\n" + _index() + "\n" + "\n".join(body)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        return 0 if current == text else 1
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
